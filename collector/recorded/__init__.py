"""Values recorded on a real H100 (data files only); see README.md here."""
