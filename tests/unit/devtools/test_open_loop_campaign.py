"""benchmarks/open_loop_campaign.py: engines of a GPU campaign get the CPUs they ask for, whole
physical cores for an instance's vCPUs, and never a core another engine holds."""

from pathlib import Path

import pytest

from open_loop_campaign import cpu_list, physical_cores, pick_cpus


def _sysfs(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, text in siblings.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(text + "\n")
    return root


def test_cores_are_read_from_sysfs_with_their_hardware_threads(tmp_path: Path) -> None:
    # 4 cores, 2 threads each, the second thread numbered 4 higher (as Linux numbers them on x86).
    root = _sysfs(tmp_path, {cpu: f"{cpu % 4},{cpu % 4 + 4}" for cpu in range(8)})
    assert physical_cores(root) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert cpu_list("0-2,5") == [0, 1, 2, 5]


def test_an_instance_s_vcpus_are_whole_cores_no_other_engine_touches(tmp_path: Path) -> None:
    cores = physical_cores(_sysfs(tmp_path, {cpu: f"{cpu % 4},{cpu % 4 + 4}" for cpu in range(8)}))
    # An ml.g6e.xlarge's 4 vCPUs are 2 cores: both threads of each, none of CPU 0's core.
    assert pick_cpus("cores:2", {0}, cores) == [1, 2, 5, 6]
    assert pick_cpus("0-1", set(), cores) == [0, 1]
    with pytest.raises(ValueError, match=r"cpus 'cores:3': 2 whole cores free of \[0, 1\], 3 asked"):
        pick_cpus("cores:3", {0, 1}, cores)
