"""The held-out splits' frozen digests: each the sha256 of its sorted sources, one per line."""

# sha256 of the sorted validation sources, one per line. Frozen when the split was drawn
# (random.Random(11).sample of a third of the sorted distinct sources): never re-draw it.
VALIDATION_SHA256 = "0702de6645d780b08d41c75278a38e2335accbef871ded5022d2c3bfeae1315f"
# sha256 of the sorted validation_3 sources (round three's held-out split, gathered from sources
# no other case uses and scored before any rule of round three): never move a case in or out.
VALIDATION_3_SHA256 = "aef104d98ace5726b428b8f1e8d3f1b73215b99e72d48b3c226d7c6d6ec086b7"
# sha256 of the sorted validation_4 sources (round eight's held-out split: the first half, rounded
# up, of the sorted new sources after random.Random(8).shuffle, drawn before any rule of round
# eight and scored once with the rules of 82874bb): never move a case in or out.
VALIDATION_4_SHA256 = "3bfb26da646365a7a87dcdd33987fec661c622c2f7795aa336b3a94dd257d5ce"
# sha256 of the sorted validation_5 sources (round ten's held-out split: the first half, rounded
# up, of the sorted new sources after random.Random(10).shuffle, drawn before any rule of round
# ten and scored once with the rules of 070e0da): never move a case in or out.
VALIDATION_5_SHA256 = "a94233f354a440902f98d82d5455834ca892a7f6a9af15bd047c895001989daf"
# sha256 of the sorted validation_6 sources (round eleven's held-out split: the first half,
# rounded up, of the sorted new sources after random.Random(12).shuffle, drawn before any rule of
# round eleven and scored once with the rules of 15b95fb): never move a case in or out.
VALIDATION_6_SHA256 = "e97bb844219e28c9ba25bdfd4aab724a25d0c2e4fc194123004bea0ba5812fa5"
# sha256 of the sorted validation_7 sources (round twelve's held-out split: the first half,
# rounded up, of the sorted new sources after random.Random(14).shuffle, drawn before any rule of
# round twelve and scored once with the rules of 9ea726b): never move a case in or out.
VALIDATION_7_SHA256 = "862dbc56b9887ac729b4ea77035a47b558bb8b2dbc15ada7ea195b1dec86729f"
# sha256 of the sorted validation_8 sources (round thirteen's held-out split: the first half,
# rounded up, of the sorted new sources after random.Random(16).shuffle, drawn before any rule of
# round thirteen and scored once with the rules of f0e5281): never move a case in or out.
VALIDATION_8_SHA256 = "29fc1c8a54ba10574aa86cba94a430b53451d6c8c92ff4131fadb95476fad354"
# sha256 of the sorted validation_9 sources (round fourteen's held-out split: the first half of
# the 20 sorted new sources after random.Random(18).shuffle, drawn before any rule of round
# fourteen and scored once with the rules of 02b7fc8): never move a case in or out.
VALIDATION_9_SHA256 = "3009ecbaeee0b1515da785964e3c98b1e5a70e6e933d6a0eb1b73dddeb68fd02"
# sha256 of the sorted validation_10 sources (round fifteen's held-out split: the first half of
# the 20 sorted new sources after random.Random(20).shuffle, drawn before any rule of round
# fifteen and scored once with the rules of 511c70c): never move a case in or out.
VALIDATION_10_SHA256 = "0a1aadd6b50823b865c11e451fa3a637df8ac7aaf1d9d9bfbd2eecb25a740834"
# sha256 of the sorted validation_11 sources (round sixteen's held-out split: the first half of
# the 20 sorted new sources after random.Random(22).shuffle, drawn before any rule of round
# sixteen and scored once with the rules of 0e5a9c3): never move a case in or out.
VALIDATION_11_SHA256 = "2770593a9a1b817c9141ce646552d0b553df74733eef820c3a646400d14bb548"
# sha256 of the sorted validation_12 sources (round seventeen's held-out split: the first half of
# the 12 sorted new sources after random.Random(24).shuffle, drawn before any rule of round
# seventeen and scored once with the rules of 72d0bf7): never move a case in or out.
VALIDATION_12_SHA256 = "b6993bd51bb42ab3a018bcfb17f373997c6722240f403d00abebc98a43bdc2dd"
# sha256 of the sorted validation_13 sources (round eighteen's held-out split: the first half of
# the 20 sorted new sources after random.Random(26).shuffle, drawn before any rule of round
# eighteen and scored once with the rules of 2a66319): never move a case in or out.
VALIDATION_13_SHA256 = "451bd1a3d2bfa41a7115f11b1f79376d0a77ff050d2a43f58154d3cd4f1037d4"
# sha256 of the sorted validation_14 sources (round nineteen's held-out split: the first half of
# the 12 sorted new sources after random.Random(28).shuffle, drawn before any rule of round
# nineteen and scored once with the rules of cec95b2): never move a case in or out.
VALIDATION_14_SHA256 = "effe4ed424fc01a6552cc814cd18e5dae9a9c3425462b099f4c5424e3d41adf4"
# sha256 of the sorted validation_15 sources (round twenty's held-out split: the first half of the
# 12 sorted new sources after random.Random(30).shuffle, drawn before any rule of round twenty
# and scored once with the rules of 465fb60): never move a case in or out.
VALIDATION_15_SHA256 = "422c172119ecbae54a421f8faa17e15e458f2b70e31e03cff379dc5dba262802"
# sha256 of the sorted validation_16 sources (round twenty-one's held-out split: the first half of
# the 10 sorted new sources after random.Random(32).shuffle, drawn before any rule of round
# twenty-one and scored once with the rules of 083f2d7): never move a case in or out.
VALIDATION_16_SHA256 = "2ec549d3aa5906ddec527736beb1d204acf79bacbe9524451e469cc6f82c881e"
# sha256 of the sorted validation_17 sources (round twenty-two's held-out split: the first half of
# the 10 sorted new sources after random.Random(34).shuffle, drawn before any rule of round
# twenty-two and scored once with the rules of 789a97c): never move a case in or out.
VALIDATION_17_SHA256 = "00efbb62789c6466e848a5cb7a5840c8461778513b2a6736bdbd3fba8b9022fe"
# sha256 of the sorted validation_18 sources (round twenty-three's held-out split: the first half
# of the 10 sorted new sources after random.Random(36).shuffle, drawn before any rule of round
# twenty-three and scored once with the rules of 3550c85): never move a case in or out.
VALIDATION_18_SHA256 = "968bbce892d771cb40074a04d7af41894e3589f723adc207e79b84070a409864"
# sha256 of the sorted validation_19 sources (round twenty-four's held-out split: the first half
# of the 10 sorted new sources after random.Random(38).shuffle, drawn before any rule of round
# twenty-four and scored once with the rules of c28b357): never move a case in or out.
VALIDATION_19_SHA256 = "24321be4265012f1eb11a7c4a343c8cca24f62515fa2d92db0a04325f037e6c4"
# sha256 of the sorted validation_20 sources (round twenty-five's held-out split: the first half
# of the 10 sorted new sources after random.Random(40).shuffle, drawn before any rule of round
# twenty-five and scored once with the rules of b0e2bca): never move a case in or out.
VALIDATION_20_SHA256 = "c98c796fe6cf41ee0b947519577252b1f0005aceeeb5dac42e88cc878c396b1a"
# sha256 of the sorted validation_21 sources (round twenty-six's held-out split: the first half
# of the 10 sorted new sources after random.Random(42).shuffle, drawn before any rule of round
# twenty-six and scored once with the rules of 8f70ae2): never move a case in or out.
VALIDATION_21_SHA256 = "67455c50ea298b42258d5efefefcf076d4de64fcb2b7015fc90f5a6be72b1c86"
# sha256 of the sorted validation_22 sources (round twenty-seven's held-out split: the first half
# of the 10 sorted new sources after random.Random(44).shuffle, drawn before any rule of round
# twenty-seven and scored once with the rules of 5e02cda): never move a case in or out.
VALIDATION_22_SHA256 = "f8bec6871d0bce8eb736094a019e5914d7ce71bbd5e4dfadf852e35ff003c671"
# sha256 of the sorted validation_23 sources (round twenty-eight's held-out split: the first half
# of the 10 sorted new sources after random.Random(46).shuffle, drawn before any rule of round
# twenty-eight and scored once with the rules of 7f1532b): never move a case in or out.
VALIDATION_23_SHA256 = "2b4f3f02411a9e925dd0381011a6759ee1c867aa54ab6504ba5dbcd851c63d0c"
# sha256 of the sorted validation_24 sources (round twenty-nine's held-out split: the first half
# of the 10 sorted new sources after random.Random(48).shuffle, drawn before any rule of round
# twenty-nine and scored once with the rules of b710e09): never move a case in or out.
VALIDATION_24_SHA256 = "c7b59cff023e8a4a2dfa2baa5797a99923af3ddea66fb90f502dbee578e9e128"
# sha256 of the sorted validation_25 sources (round thirty's held-out split: the first half of
# the 10 sorted new sources after random.Random(50).shuffle, drawn before any rule of round
# thirty and scored once with the rules of 2f7f3d3): never move a case in or out.
VALIDATION_25_SHA256 = "47fe61c846dadfdc92d51417a43869d8a79ee14bde22e5960f8239528fee703a"
# sha256 of the sorted validation_26 sources (round thirty-one's held-out split: the first half of
# the 10 sorted new sources after random.Random(52).shuffle, drawn before any rule of round
# thirty-one and scored once with the rules of 08027c4): never move a case in or out.
VALIDATION_26_SHA256 = "011563ff11e07565fc4caad97262d2df6263fe4a07f0f51f2f984205cb36cfdc"
# sha256 of the sorted validation_27 sources (round thirty-two's held-out split: the first half of
# the 10 sorted new sources after random.Random(54).shuffle, drawn before any rule of round
# thirty-two and scored once with the rules of e520538): never move a case in or out.
VALIDATION_27_SHA256 = "36b2efe7e64ee976ce63ddd25e9cf265cb1cddeb8f8f17f53f98f98a12b1f777"
# sha256 of the sorted validation_28 sources (round thirty-three's held-out split: the first half of
# the 10 sorted new sources after random.Random(56).shuffle, drawn before any rule of round
# thirty-three and scored once with the rules of 01bc83c): never move a case in or out.
VALIDATION_28_SHA256 = "6821e7c0827da6ca6aba306598e858ca4b19251a356ac897d9dfa60a3e96f843"
# sha256 of the sorted validation_29 sources (round thirty-four's held-out split: the first half of
# the 10 sorted new sources after random.Random(58).shuffle, drawn before any rule of round
# thirty-four and scored once with the rules of 11b9ae7): never move a case in or out.
VALIDATION_29_SHA256 = "b59f84fda87b23cf6c28ff012691cefe177f798f6a5e324bb0c132adaa96b3be"
# sha256 of the sorted validation_30 sources (round thirty-five's held-out split: the first half of
# the 10 sorted new sources after random.Random(60).shuffle, drawn before any rule of round
# thirty-five and scored once with the rules of fdba9fd): never move a case in or out.
VALIDATION_30_SHA256 = "5851201dec9c272d13b5cb1f703a93954958f550119826ba7dfe521e6362c57c"
# sha256 of the sorted validation_31 sources (round thirty-six's held-out split: the first half of
# the 10 sorted new sources after random.Random(62).shuffle, drawn before any rule of round
# thirty-six and scored once with the rules of d6437b2): never move a case in or out.
VALIDATION_31_SHA256 = "4404430d875d2355cd59009cbfc0bbcd8cf168ec06b75781cb2585c6537c8ddc"
# sha256 of the sorted validation_32 sources (round thirty-seven's held-out split: the first half of
# the 10 sorted new sources after random.Random(64).shuffle, drawn before any rule of round
# thirty-seven and scored once with the rules of bf5e1f9): never move a case in or out.
VALIDATION_32_SHA256 = "9f5c0d99e30fcb7a5682ff281d8e080866a811d71cb86df436a1ea0a773e7b09"
# sha256 of the sorted validation_33 sources (round thirty-eight's held-out split: the first half of
# the 10 sorted new sources after random.Random(66).shuffle, drawn before any rule of round
# thirty-eight and scored once with the rules of 2dfb24e): never move a case in or out.
VALIDATION_33_SHA256 = "e84abd412740ce0ae0a3b53645c712ea85b862802f92f258768ca8c076344cbf"
# sha256 of the sorted validation_34 sources (round thirty-nine's held-out split: the first half of
# the 10 sorted new sources after random.Random(68).shuffle, drawn before any rule of round
# thirty-nine and scored once with the rules of 43e269d): never move a case in or out.
VALIDATION_34_SHA256 = "0da9422850b631e3325447c4dbae1002215abac497949cf53589866c5f7cd70c"
# sha256 of the sorted validation_35 sources (round forty's held-out split: the first half of the
# 10 sorted new sources after random.Random(70).shuffle, drawn before any rule of round forty and
# scored once with the rules of 177c3d1): never move a case in or out.
VALIDATION_35_SHA256 = "4769638d503f73bf4fd410dfeeed3c5017258a67f4523b686bfaea23725cad35"
# sha256 of the sorted validation_36 sources (round forty-one's held-out split: the first half of
# the 10 sorted new sources after random.Random(72).shuffle, drawn before any rule of round
# forty-one and scored once with the rules of f858b7d): never move a case in or out.
VALIDATION_36_SHA256 = "c6a89eddc93e89725dbfb9d7dd1a0ca3716b40969419613b489929bd0a7337f2"
# sha256 of the sorted validation_37 sources (round forty-two's held-out split: the first half of
# the 10 sorted new sources after random.Random(74).shuffle, drawn before any rule of round
# forty-two and scored once with the rules of 6d65ff0): never move a case in or out.
VALIDATION_37_SHA256 = "1b50a0eea8b21ba0883d30cb287462267919a90deb7a26156af347a6b205e073"
# sha256 of the sorted validation_38 sources (round forty-three's held-out split: the first half of
# the 10 sorted new sources after random.Random(76).shuffle, drawn before any rule of round
# forty-three and scored once with the rules of ace8fa2): never move a case in or out.
VALIDATION_38_SHA256 = "30c64314803d75037c7fd487f20fd247d61be1b5262e4d045a403a728ba5b6fa"
# sha256 of the sorted validation_39 sources (round forty-four's held-out split: the first half of
# the 10 sorted new sources after random.Random(78).shuffle, drawn before any rule of round
# forty-four and scored once with the rules of 48533c6): never move a case in or out.
VALIDATION_39_SHA256 = "3e98ef7e0f2a3eb674faa47d14f5fe84424086d134425781d4e1f9b859ee78ff"
# sha256 of the sorted validation_40 sources (round forty-five's held-out split: the first half of
# the 10 sorted new sources after random.Random(80).shuffle, drawn before any rule of round
# forty-five and scored once with the rules of 381f4a6): never move a case in or out.
VALIDATION_40_SHA256 = "246ffd89fc4ed6264238a2a1d99685bc095adcb1baa1a0c7435e605979fc5f57"
# sha256 of the sorted validation_41 sources (round forty-six's held-out split: the first half of
# the 10 sorted new sources after random.Random(82).shuffle, drawn before any rule of round
# forty-six and scored once with the rules of 10a55c1): never move a case in or out.
VALIDATION_41_SHA256 = "b43daa03bf8543825e2f73bd75178eb77d325e3fa317c8d00f292f722264d33c"
