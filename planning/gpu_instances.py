"""GPUs of the SageMaker hosting instance types the config accepts.

Counts and GPU models: the Amazon EC2 accelerated computing specifications page
(https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html), which SageMaker's ``ml.``
types share. Memory is what the CUDA driver reports as the device's total (``nvidia-smi``'s
``memory.total``, ``torch.cuda.mem_get_info()[1]``), because that is what vLLM multiplies by
``gpu_memory_utilization`` (``request_memory`` in vllm/v1/worker/utils.py); it is a little
below the marketing figure (an A10G "24 GB" reports 23,028 MiB).
"""

from dataclasses import dataclass
from typing import Final

MIB: Final = 1024**2
GIB: Final = 1024**3


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU model.

    Attributes:
        name: NVIDIA's name, e.g. ``A10G``.
        memory_mib: total device memory the driver reports, MiB.
        compute_capability: e.g. ``(8, 6)``; vLLM's Marlin kernels need >= (8, 0).
        source: where ``memory_mib`` comes from.
        dense_fp16_tflops: FP16 tensor-core throughput without structured sparsity, TFLOPS, from
            the vendor's datasheet (docs/sources.md, "GPU datasheets"); what bounds prefill.
        memory_bandwidth_gbs: device memory bandwidth, GB/s, same source; what bounds decode.
        matmul_tflops: what plain FP16 matmul measures on the card, TFLOPS (docs/sources.md,
            "GPU matmul throughput, measured"): what prefill scales with. A power-capped card
            (the 72 W L4) reaches about half its datasheet; Hopper about 77 %.
        matmul_tflops_range: the lowest and highest published measurement, TFLOPS: the
            projection's spread, which a planner counts against a GPU never measured here.
    """

    name: str
    memory_mib: int
    compute_capability: tuple[int, int]
    source: str
    dense_fp16_tflops: float
    memory_bandwidth_gbs: float
    matmul_tflops: float
    matmul_tflops_range: tuple[float, float]

    @property
    def memory_bytes(self) -> int:
        """The driver's total memory of one GPU, bytes (what vLLM multiplies by its utilization)."""
        return self.memory_mib * MIB


# nvidia-smi totals as published with the GPU's name: modal-labs/modal-client PR #2797 (A10G, L4,
# L40S, A100 40/80 GB, H100), NVIDIA/DCGM issue #232 (A10G on EC2), NVIDIA/nccl issue #1264 (H100).
T4: Final = Gpu("T4", 15_360, (7, 5), "nvidia-smi (Tesla T4, 15360 MiB)", 65.0, 320.0, 42.3, (41.9, 42.7))
# AWS's A10G has less tensor throughput than the A10 (70 vs 125 dense FP16 TFLOPS) and the same
# 600 GB/s (docs/sources.md, "GPU datasheets").
A10G: Final = Gpu(
    "A10G", 23_028, (8, 6), "nvidia-smi on g5 (NVIDIA/DCGM #232: 23028MiB)", 70.0, 600.0, 69.5, (69.5, 69.5)
)
L4: Final = Gpu("L4", 23_034, (8, 9), "nvidia-smi (modal-client #2797: 23034MiB)", 121.0, 300.0, 61.0, (53.0, 69.0))
L40S: Final = Gpu(
    "L40S", 46_068, (8, 9), "nvidia-smi (modal-client #2797: 46068MiB)", 362.0, 864.0, 264.0, (264.0, 264.0)
)
A100_40GB: Final = Gpu(
    "A100-SXM4-40GB", 40_960, (8, 0), "nvidia-smi (modal-client #2797: 40960MiB)", 312.0, 1_555.0, 247.6, (247.6, 247.6)
)
A100_80GB: Final = Gpu(
    "A100-SXM4-80GB",
    81_920,
    (8, 0),
    "nvidia-smi (NVIDIA/mig-parted #31: 81920MiB)",
    312.0,
    2_039.0,
    258.7,
    (258.7, 266.0),
)
H100_80GB: Final = Gpu(
    "H100 80GB HBM3",
    81_559,
    (9, 0),
    "nvidia-smi (NVIDIA/nccl #1264: 81559MiB), as on the bench H100",
    989.0,
    3_350.0,
    760.0,
    (758.1, 761.8),
)
H200: Final = Gpu(
    "H200",
    143_771,
    (9, 0),
    "nvidia-smi on the bench H200 (143771 MiB, 2026-11-25)",
    989.0,
    4_800.0,
    759.4,
    (759.4, 759.4),
)


@dataclass(frozen=True, slots=True)
class InstanceGpus:
    """The GPUs of one hosting instance type, and its vCPUs and host memory (GiB)."""

    gpu: Gpu
    count: int
    vcpus: int = 0
    memory_gib: int = 0

    @property
    def memory_bytes(self) -> int:
        """All GPUs' memory together, bytes."""
        return self.gpu.memory_bytes * self.count


def _family(gpu: Gpu, sizes: dict[str, tuple[int, int, int]], family: str) -> dict[str, InstanceGpus]:
    return {f"ml.{family}.{size}": InstanceGpus(gpu, *spec) for size, spec in sizes.items()}


# Size -> (GPUs, vCPUs, memory GiB), from the EC2 accelerated computing page. g4dn, g5 and g6
# share vCPUs and GPU counts per size; memory is 4 GiB per vCPU on g4dn/g5/g6, 8 on g6e.
_G_GPUS: Final = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4}
_VCPUS: Final = {
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "12xlarge": 48,
    "16xlarge": 64,
    "24xlarge": 96,
}


def _sizes(gib_per_vcpu: int, with_48xlarge: bool = True) -> dict[str, tuple[int, int, int]]:
    sizes = {size: (_G_GPUS[size], vcpus, vcpus * gib_per_vcpu) for size, vcpus in _VCPUS.items()}
    if with_48xlarge:
        sizes["48xlarge"] = (8, 192, 192 * gib_per_vcpu)
    return sizes


_G4DN: Final = {size: spec for size, spec in _sizes(4, with_48xlarge=False).items() if size != "24xlarge"}

INSTANCE_GPUS: Final[dict[str, InstanceGpus]] = {
    **_family(T4, _G4DN, "g4dn"),
    **_family(A10G, _sizes(4), "g5"),
    **_family(L4, _sizes(4), "g6"),
    **_family(L40S, _sizes(8), "g6e"),
    "ml.p4d.24xlarge": InstanceGpus(A100_40GB, 8, 96, 1152),
    "ml.p4de.24xlarge": InstanceGpus(A100_80GB, 8, 96, 1152),
    "ml.p5.48xlarge": InstanceGpus(H100_80GB, 8, 192, 2048),
    "ml.p5e.48xlarge": InstanceGpus(H200, 8, 192, 2048),
    "ml.p5en.48xlarge": InstanceGpus(H200, 8, 192, 2048),
}
"""Every GPU instance type a production variant may use, with its GPUs."""


def instance_gpus(instance_type: str) -> InstanceGpus:
    """The GPUs of ``instance_type``.

    Raises:
        ValueError: one line naming the known GPU families, for any other type.
    """
    found = INSTANCE_GPUS.get(instance_type)
    if found is None:
        families = sorted({name.split(".")[1] for name in INSTANCE_GPUS})
        raise ValueError(
            f"no GPU table entry for {instance_type}; supported GPU families: {', '.join(families)} "
            "(planning/gpu_instances.py)"
        )
    return found


def engines_per_instance(instance_type: str, tensor_parallel_size: int) -> int:
    """vLLM engines one ``instance_type`` instance runs: one per ``tensor_parallel_size`` GPUs.

    In variants mode they are data-parallel engines in one container (``--data-parallel-size``);
    in inference_components mode, one copy per GPU group.

    Raises:
        ValueError: the instance type is unknown (:func:`instance_gpus`).
    """
    return max(instance_gpus(instance_type).count // tensor_parallel_size, 1)
