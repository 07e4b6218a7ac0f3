"""The torch.compile cache at start: load a made one, report hit or miss, or make one.

A cache-making job (issue 25; ``cdk_constructs`` compile-cache construct) runs this image on
the serving instance type with the model's exact environment and ``make-compile-cache``: the
engine starts as in ``serve``, and once the gateway is ready the engine's ``VLLM_CACHE_ROOT``
is copied to the job's output with a manifest (:mod:`serving_contract.compile_cache`). Each
SageMaker model then gets that folder as model data in ``/opt/ml/model`` and
``COMPILE_CACHE_DIR`` pointing there.

At start, :func:`prepare` decides, and logs one line saying which:

* ``off``: ``COMPILE_CACHE_DIR`` unset (a local run, or the cache disabled in config);
* ``absent``: no manifest, or the job did not make the cache (status pending or failed);
* ``stale``: the manifest was made for another key than ``COMPILE_CACHE_KEY``;
* ``rejected``: the manifest is not the one the deploy pinned (``COMPILE_CACHE_MANIFEST_SHA256``), or
  a file of the cache is missing, extra or differs from the manifest's sha256 (issue 49: vLLM runs
  code from the cache, so only the job's files may reach it);
* ``loaded``: the manifest matches and every file is verified; the cache is copied into the engine's
  ``VLLM_CACHE_ROOT``,
  and when the job also tuned the LoRA kernels (``lora-configs/``, issue 35) that folder is
  passed to vLLM as ``VLLM_TUNED_CONFIG_FOLDER`` (an explicit ``LORA_TUNED_CONFIG_DIR`` wins).

Every case but ``loaded`` is a normal cold start, never a failure. The cache is copied rather
than read in place (which works, docs/performance.md) so that a vLLM-level miss, one whose key
differs in something ours does not hash, compiles into a writable folder instead of failing on
the read-only model data. Whether vLLM really hit is known only after the start:
:meth:`CachePlan.report_after_ready` looks for files vLLM wrote and logs ``hit`` or ``miss``.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import shutil
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from serving_app.vllm_args import TUNED_CONFIG_FOLDER
from serving_contract import compile_cache as contract

log = logging.getLogger("serving_app.compile_cache")

CACHE_ROOT_VAR: Final = "VLLM_CACHE_ROOT"
DEFAULT_CACHE_ROOT: Final = "~/.cache/vllm"
"""vLLM 0.26's default ``VLLM_CACHE_ROOT`` (vllm/envs.py)."""


def cache_root(environ: Mapping[str, str]) -> Path:
    """The engine's ``VLLM_CACHE_ROOT`` for ``environ`` (vLLM's default when unset)."""
    return Path(os.path.expanduser(environ.get(CACHE_ROOT_VAR) or DEFAULT_CACHE_ROOT))


def _files(root: Path) -> frozenset[str]:
    if not root.is_dir():
        return frozenset()
    return frozenset(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@dataclass(frozen=True, slots=True)
class CachePlan:
    """What :func:`prepare` found.

    Attributes:
        state: ``off``, ``absent``, ``stale``, ``rejected`` or ``loaded``.
        reason: one line saying why.
        root: the engine's ``VLLM_CACHE_ROOT``.
        files_before: the files under ``root`` before the engine started.
        lora_configs: the tuned LoRA kernel configs' folder passed to vLLM, or None.
    """

    state: str
    reason: str
    root: Path
    files_before: frozenset[str]
    lora_configs: Path | None = None

    def report_after_ready(self, ready_s: float) -> str:
        """Log and return whether vLLM used the cache: any file it wrote means it compiled."""
        written = _files(self.root) - self.files_before
        if self.state == "loaded":
            verdict = "hit" if not written else "miss"
            detail = (
                "vLLM loaded every graph from it"
                if not written
                else f"vLLM compiled anyway ({len(written)} new files: its own key differs)"
            )
        else:
            verdict, detail = "cold", f"{self.state}: {self.reason}"
        line = f"compile cache: {verdict} after {ready_s:.1f} s to ready; {detail}"
        log.info(line)
        return verdict


def prepare(environ: MutableMapping[str, str]) -> CachePlan:
    """Load the made cache named by ``environ`` into the engine's cache root; log which case.

    ``environ`` is the engine's environment: ``VLLM_CACHE_ROOT`` is set in it when a cache is
    loaded (vLLM's default otherwise). Never raises for a missing, bad or tampered cache: those
    are cold starts, logged (a rejected one as a warning). Raises ``OSError`` only if the copy
    itself fails (a full disk), which would fail the cold start too.
    """
    root = cache_root(environ)
    made = environ.get(contract.COMPILE_CACHE_DIR, "").strip()
    state, reason = "off", f"{contract.COMPILE_CACHE_DIR} is not set"
    if made:
        pin = environ.get(contract.COMPILE_CACHE_MANIFEST_SHA256, "").strip()
        state, reason = _check(Path(made), environ.get(contract.COMPILE_CACHE_KEY, "").strip(), pin)
    if state == "loaded":
        source = Path(made) / contract.CACHE_SUBDIR
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, root, dirs_exist_ok=True)
        # Model data is read-only; the copies must not be, or vLLM could not update them.
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        environ[CACHE_ROOT_VAR] = str(root)
    log.log(logging.WARNING if state == "rejected" else logging.INFO, "compile cache: %s (%s)", state, reason)
    lora_configs = _lora_configs(Path(made), environ) if state == "loaded" else None
    return CachePlan(state=state, reason=reason, root=root, files_before=_files(root), lora_configs=lora_configs)


def _lora_configs(made: Path, environ: MutableMapping[str, str]) -> Path | None:
    """Point vLLM at the cache's tuned LoRA kernel configs, if the job made them; log which case.

    Read in place: vLLM only reads them (``load_lora_op_config``), and names the file it uses or
    the one it missed for this GPU in its own log.
    """
    folder = made / contract.LORA_CONFIGS_SUBDIR
    configs = sorted(p.name for p in folder.glob("*.json") if p.name != contract.LORA_TUNING_REPORT)
    if not configs:
        detail = _manifest_field(made, "lora_tuning") or "the job made none"
        log.info("lora configs: none in the cache (%s); vLLM's default kernel configs", detail)
        return None
    if environ.get(TUNED_CONFIG_FOLDER):
        log.info(
            "lora configs: %s set to %s (LORA_TUNED_CONFIG_DIR); the cache's %s not used",
            TUNED_CONFIG_FOLDER,
            environ[TUNED_CONFIG_FOLDER],
            folder,
        )
        return None
    environ[TUNED_CONFIG_FOLDER] = str(folder)
    log.info("lora configs: %s=%s (%s)", TUNED_CONFIG_FOLDER, folder, ", ".join(configs))
    return folder


def _manifest_field(made: Path, field: str) -> str:
    try:
        return str(getattr(contract.Manifest.from_json((made / contract.MANIFEST_NAME).read_text()), field))
    except (OSError, contract.ManifestError):
        return ""


def _check(made: Path, key: str, pin: str = "") -> tuple[str, str]:
    manifest_path = made / contract.MANIFEST_NAME
    if not manifest_path.is_file():
        return "absent", f"no {manifest_path}: a cold start"
    try:
        raw = manifest_path.read_bytes()
        if pin and contract.manifest_sha256(raw) != pin:
            return "rejected", (
                f"{manifest_path} has sha256 {contract.manifest_sha256(raw)}, not the "
                f"{contract.COMPILE_CACHE_MANIFEST_SHA256} {pin} the deploy pinned (written after it); a cold start"
            )
        manifest = contract.Manifest.from_json(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, contract.ManifestError) as exc:
        return "absent", f"{manifest_path}: {exc}; a cold start"
    if manifest.status != contract.STATUS_READY:
        detail = f": {manifest.detail}" if manifest.detail else ""
        return "absent", f"the cache-making job's status is {manifest.status}{detail}; a cold start"
    if manifest.key != key:
        expected = f"this model's {contract.COMPILE_CACHE_KEY} is {key!r}"
        return "stale", f"made for key {manifest.key}, {expected}; a cold start"
    if not (made / contract.CACHE_SUBDIR).is_dir():
        return "absent", f"the manifest says ready but {made / contract.CACHE_SUBDIR} is missing; a cold start"
    mismatch = _unverified(made, manifest.digests)
    if mismatch:
        return "rejected", f"{mismatch}; a cold start"
    pinned = "pinned manifest" if pin else f"manifest not pinned ({contract.COMPILE_CACHE_MANIFEST_SHA256} unset)"
    return "loaded", (
        f"key {key}, {manifest.files} files made on {manifest.gpu_name or 'an unnamed GPU'}, "
        f"{len(manifest.digests)} sha256-verified ({pinned})"
    )


def _unverified(made: Path, digests: dict[str, str]) -> str | None:
    """Why the files under ``made`` are not exactly the ones ``digests`` names, or None.

    The folder is SageMaker's read-only download of the model data, so what is hashed here is
    what gets copied; the first difference is reported (a path and what is wrong with it).
    """
    if not digests:
        return "the manifest records no file digests (made before they were recorded)"
    try:
        found = contract.file_digests(made)
    except (OSError, ValueError) as exc:
        return f"cannot verify the cache: {exc}"
    for path in sorted(digests.keys() | found.keys()):
        if path not in found:
            return f"{path} is in the manifest but missing"
        if path not in digests:
            return f"{path} is not in the manifest"
        if found[path] != digests[path]:
            return f"{path} has sha256 {found[path]}, the manifest says {digests[path]}"
    return None


def write_made_cache(root: Path, output_dir: Path, *, key: str, gpu_name: str) -> contract.Manifest:
    """Copy the engine's cache ``root`` to ``output_dir/vllm-cache`` and write the manifest, with the
    sha256 of every file copied (``digests``).

    The manifest goes last, so a job cut off mid-copy leaves no ``ready`` manifest. Raises
    ``OSError`` when the copy fails and ``ValueError`` when ``root`` holds no file (the engine
    compiled nothing: ``enforce_eager`` on, say) or a symbolic link, which the job reports as its
    failure.
    """
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
    if not files:
        raise ValueError(f"{CACHE_ROOT_VAR}={root} holds no file after the start: nothing was compiled")
    destination = output_dir / contract.CACHE_SUBDIR
    shutil.copytree(root, destination, dirs_exist_ok=True)
    manifest = contract.Manifest(
        key=key,
        status=contract.STATUS_READY,
        gpu_name=gpu_name,
        files=len(files),
        bytes=sum(p.stat().st_size for p in files),
        made_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        # Of the copies SageMaker uploads, so the container checks exactly what the job published.
        digests=contract.file_digests(output_dir),
    )
    (output_dir / contract.MANIFEST_NAME).write_text(manifest.to_json())
    log.info("compile cache: made %d files (%d bytes) for key %s in %s", len(files), manifest.bytes, key, output_dir)
    return manifest


def record_lora_tuning(output_dir: Path, *, files: int, line: str) -> contract.Manifest:
    """Add the LoRA tuning step's result to the made cache's manifest (``lora_configs``, ``lora_tuning``,
    and the digests of the ``lora-configs/`` files beside those of the cache).

    Raises ``OSError``, ``ValueError`` or :class:`serving_contract.compile_cache.ManifestError` when
    the manifest cannot be read or written; the caller then removes ``lora-configs/``, so the
    published cache still verifies.
    """
    path = output_dir / contract.MANIFEST_NAME
    manifest = dataclasses.replace(
        contract.Manifest.from_json(path.read_text()),
        lora_configs=files,
        lora_tuning=line,
        digests=contract.file_digests(output_dir),
    )
    path.write_text(manifest.to_json())
    return manifest


def gpu_name() -> str:
    """The first GPU's name from ``nvidia-smi`` (empty where there is none: the CPU build)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    import subprocess  # noqa: PLC0415  (only on the make path)

    try:
        result = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
