"""cudaGetDeviceCount failing with cudaErrorInitializationError (round forty-four's case 986).

Source (correlator/rules/emitters/cuda.json, rule cuda_device_count_init_error): the CUDA
runtime API's enum cudaError, cudaErrorInitializationError (3) 'initialization error': the CUDA
driver and runtime could not be initialized. cudaGetDeviceCount is the call that brings CUDA up,
so the node's driver cannot bring its GPUs up: node/node, named on the line's own host, and
the same under a delivering tool's line prefix (the reading no longer rests on the prompt line).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_EPILOG = (
    "[root@gpu0421:epilog.d]# /admin/scripts/test_gpu_node\n"
    "FAILED: gpu0421 Failed during cudaGetDeviceCount: initialization error\n"
)


@pytest.mark.parametrize(
    "text",
    [
        _EPILOG,
        "FAILED: gpu0421 Failed during cudaGetDeviceCount: initialization error\n",
        "2025-03-04T05:06:07.000000001Z FAILED: gpu0421 Failed during cudaGetDeviceCount: "
        "initialization error\n",
        "[1,0]<stderr>:cudaGetDeviceCount returned 3 (cudaErrorInitializationError)\n",
    ],
)
def test_cuda_that_cannot_be_initialised_on_the_node_is_the_nodes(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node"), got.explanation


def test_the_prompts_host_is_the_culprit_of_its_failed_gpu_test() -> None:
    assert explain_text(_EPILOG).node == "gpu0421"


@pytest.mark.parametrize(
    "text",
    [
        "cudaGetDeviceCount returned 8 devices\n",
        "cudaGetDeviceCount: no error\n",
        "initialization error in the data loader config\n",
    ],
)
def test_a_device_count_that_succeeded_is_no_fault(text: str) -> None:
    assert explain_text(text).category is None
