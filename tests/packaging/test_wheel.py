"""The wheel, installed beyond the checkout: the real ``dlc-ledger`` script, from elsewhere.

Builds the wheel from a copy of the sources, installs it with its dependencies into a
fresh virtualenv in a temporary directory, and runs the console script there with the
checkout out of reach (no ``PYTHONPATH``, another working directory): the code, the
traces, the demo price book and quota tree and the migrations must all come from the
installed wheel. Slow (pip installs the dependencies, about a minute), still in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

# what a source tree holds besides the sources (build/ would leak stale files into a wheel)
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)


def _outside_env(**extra: str) -> dict[str, str]:
    """The environment without anything pointing at the checkout or the shared venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "DATABASE_URL", "KAFKA_BOOTSTRAP")
    }
    return {**env, **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``bin`` directory of a fresh virtualenv holding only the wheel (and its deps)."""
    work = tmp_path_factory.mktemp("wheel")
    src, dist, venv = work / "src", work / "dist", work / "venv"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    env = _outside_env()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        check=True, env=env, cwd=work, timeout=600,
    )  # fmt: skip
    (wheel,) = dist.glob("dlc_ledger-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("bench/", "tests/"))]
    for shipped in (
        "kubesim/data/README.md",  # the traces' attribution travels with them
        "kubesim/data/alibaba-gpu-v2023/openb_pod_list_default.csv",
        "kubesim/data/alibaba-gpu-v2023/openb_node_list_all_node.csv",
        "kubesim/data/alibaba-gpu-v2025/disaggregated_DLRM_trace.csv",
        "dlc_ledger/resources/pricebooks/demo-2026.yaml",
        "dlc_ledger/resources/quotas/demo.yaml",
        "dlc_ledger/resources/subscriptions/demo.yaml",
        "migrations/alembic.ini",
        # the dashboard served at / and its vendored chart library with its licence
        "dlc_ledger/api/dashboard/index.html",
        "dlc_ledger/api/dashboard/app.js",
        "dlc_ledger/api/dashboard/views/quotas.js",
        "dlc_ledger/api/dashboard/vendor/uPlot.esm.js",
        "dlc_ledger/api/dashboard/vendor/uPlot.LICENSE",
    ):
        assert shipped in names, shipped
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", str(wheel)],
        check=True, env=env, cwd=work, timeout=900,
    )  # fmt: skip
    shutil.rmtree(src)  # nothing may be read from the copy either
    yield venv / "bin"


def _run(bin_dir: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        capture_output=True, text=True, cwd=cwd, env=_outside_env(**env), timeout=600,
    )  # fmt: skip


def test_the_code_and_its_data_come_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    venv = installed.parent.resolve()
    probe = (
        "import json, dlc_ledger, kubesim, ledger, migrations\n"
        "from dlc_ledger.resources import DEMO_PRICE_BOOK, DEMO_QUOTAS\n"
        "from kubesim.traces import OPENB_PODS_CSV, load_trace\n"
        "trace = load_trace('dlrm')\n"
        "print(json.dumps({'modules': [m.__file__ for m in (dlc_ledger, kubesim, ledger,"
        " migrations)], 'files': [str(DEMO_PRICE_BOOK), str(DEMO_QUOTAS), str(OPENB_PODS_CSV)],"
        " 'dlrm': len(trace.instances)}))\n"
    )
    done = _run(installed, tmp_path, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    for path in found["modules"] + found["files"]:
        assert Path(path).resolve().is_relative_to(venv), path
        assert not Path(path).resolve().is_relative_to(ROOT), path
    assert all(Path(p).is_file() for p in found["files"])
    assert found["dlrm"] == 23_871
    bench = _run(installed, tmp_path, "python", "-c", "import bench")
    assert bench.returncode == 1 and "No module named 'bench'" in bench.stderr


def test_the_console_script_runs_from_another_directory(installed: Path, tmp_path: Path) -> None:
    top = _run(installed, tmp_path, "dlc-ledger", "--help")
    assert top.returncode == 0, top.stderr
    assert "replay" in top.stdout and "demo" in top.stdout
    demo = _run(installed, tmp_path, "dlc-ledger", "demo", "--help")
    assert demo.returncode == 0, demo.stderr
    assert "--fresh" in demo.stdout


def test_an_installed_replay_of_the_bundled_trace(
    installed: Path, tmp_path: Path, database_url: str, bootstrap: str
) -> None:
    """``replay --trace openb`` on a fresh database and a real broker, set up with the demo's
    price book and quota tree as the installed package finds them."""
    where = _run(
        installed, tmp_path, "python", "-c",
        "from dlc_ledger.resources import DEMO_PRICE_BOOK, DEMO_QUOTAS\n"
        "print(DEMO_PRICE_BOOK, DEMO_QUOTAS)",
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    book, quotas = where.stdout.split()
    env = {
        "DATABASE_URL": database_url,
        "KAFKA_BOOTSTRAP": bootstrap,
        "DLC_DATA_DIR": str(tmp_path),
    }
    done = _run(
        installed, tmp_path, "dlc-ledger", "replay", "--trace", "openb", "--limit", "200",
        "--pricebook", book, "--quotas", quotas, "--json", **env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["ok"] and summary["projected"] and summary["dead_letters"] == 0
    assert summary["instances"] == 200
    assert summary["occupancies_started"] == summary["expected_started"] > 0
    shown = _run(installed, tmp_path, "dlc-ledger", "prices", "show", "demo-2026", **env)
    assert shown.returncode == 0 and "2.40" in shown.stdout, shown.stderr
    listed = _run(installed, tmp_path, "dlc-ledger", "quotas", "list", **env)
    assert listed.returncode == 0 and "openb" in listed.stdout, listed.stderr
