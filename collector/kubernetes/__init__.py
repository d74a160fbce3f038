"""Kubernetes cluster source (pods, events, nodes) for the server."""

from __future__ import annotations

import os
from typing import Any

from collector.kubernetes.source import KubernetesSource, make_api_client
from timeline.settings import Settings

__all__ = ["KubernetesSource", "build_api_client", "build_kubernetes_source", "make_api_client"]


def build_api_client(settings: Settings) -> Any:
    """An ApiClient as configured: an explicit host+token, else in-cluster config, else
    kubeconfig (shared by the source and the healer)."""
    from kubernetes import client, config

    if settings.kubernetes_host:
        token = settings.kubernetes_token.get_secret_value() if settings.kubernetes_token else None
        api = make_api_client(
            settings.kubernetes_host,
            token,
            ca_file=settings.kubernetes_ca_file,
            verify_ssl=settings.kubernetes_verify_ssl,
        )
    else:
        conf = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=conf)
        except config.ConfigException:
            # $KUBECONFIG read now: the client reads it once, at import time.
            path = settings.kubernetes_kubeconfig or os.environ.get("KUBECONFIG")
            config.load_kube_config(config_file=path, client_configuration=conf)
        conf.retries = 0
        api = client.ApiClient(conf)
    return api


def build_kubernetes_source(settings: Settings) -> KubernetesSource:
    """The source as configured (see build_api_client for how it reaches the API server)."""
    api = build_api_client(settings)
    return KubernetesSource(
        api,
        cluster=settings.kubernetes_cluster,
        gpu_resource=settings.kubernetes_gpu_resource,
        user_keys=settings.kubernetes_user_keys,
        gpu_pods_only=settings.kubernetes_gpu_pods_only,
        watch_timeout_s=settings.kubernetes_watch_timeout_s,
        backoff_max_s=settings.kubernetes_backoff_max_s,
    )
