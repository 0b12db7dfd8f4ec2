"""The gRPC channel and stub to a GCS's services, one channel per address."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=16)
def channel(gcs_address: str) -> Any:
    """A gRPC channel to the GCS at an address (one per address, reused)."""
    from ray._private.grpc_utils import init_grpc_channel

    options = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]
    return init_grpc_channel(gcs_address, options)


def task_stub(gcs_address: str) -> Any:
    """A gRPC stub for the GCS's task events at an address."""
    from ray.core.generated import gcs_service_pb2_grpc

    return gcs_service_pb2_grpc.TaskInfoGcsServiceStub(channel(gcs_address))
