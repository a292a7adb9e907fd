"""``spark_windowing_pyspark_zip``: which ``sys.path`` entries are pip-installed pyspark's zip
copies of packages installed beside them (dropped at interpreter start once opted in), which are
not, and the opt-in command that writes and removes the ``.pth``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import spark_windowing_pyspark_zip as pz

ROOT = Path(__file__).resolve().parents[2]


def _site(tmp_path: Path, py4j: str | None = "0.10.9.9") -> Path:
    """A site-packages with pyspark (its python/lib zips) and, unless None, py4j ``py4j``."""
    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (lib / "pyspark.zip").write_bytes(b"")
    (lib / "py4j-0.10.9.9-src.zip").write_bytes(b"")
    if py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
        (site / f"py4j-{py4j}.dist-info").mkdir()
    return site


def _zips(site: Path) -> list[str]:
    lib = site / "pyspark" / "python" / "lib"
    return [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]


def test_the_zips_inside_an_installed_pyspark_are_duplicates(tmp_path):
    site = _site(tmp_path)
    path = [*_zips(site), "/usr/lib/python311.zip", str(site)]
    assert pz.duplicate_zips(path) == _zips(site)


def test_zips_whose_package_is_not_on_the_path_are_kept(tmp_path):
    """An executor whose Python has no pyspark installed imports it from the zip: kept."""
    site = _site(tmp_path)
    assert pz.duplicate_zips([*_zips(site), str(tmp_path / "elsewhere")]) == []


def test_a_spark_distributions_zips_are_kept(tmp_path):
    """``SPARK_HOME`` of a Spark distribution: its python/lib is not inside an installed package."""
    site = _site(tmp_path)
    dist = tmp_path / "spark-4.3.0-bin-hadoop3" / "python" / "lib"
    dist.mkdir(parents=True)
    path = [str(dist / "pyspark.zip"), str(dist / "py4j-0.10.9.9-src.zip"), str(site)]
    assert pz.duplicate_zips(path) == []


def test_py4j_of_another_version_keeps_its_zip(tmp_path):
    site = _site(tmp_path, py4j="0.10.9.7")
    assert pz.duplicate_zips([*_zips(site), str(site)]) == _zips(site)[:1]


def test_no_py4j_installed_keeps_its_zip(tmp_path):
    site = _site(tmp_path, py4j=None)
    assert pz.duplicate_zips([*_zips(site), str(site)]) == _zips(site)[:1]


def _interpreter_path(site: Path, keep: bool) -> list[str]:
    """``sys.path`` of a new interpreter whose PYTHONPATH starts with the zips, as Spark starts its
    workers, and whose site directory ``site`` holds the opt-in's .pth (``site.addsitedir`` runs it)."""
    assert pz.main(["install", "--site", str(site)]) == 0
    code = (f"import sys, site; sys.path.insert(0, {str(ROOT)!r}); site.addsitedir({str(site)!r}); "
            "print('\\n'.join(sys.path))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(_zips(site))}
    env.pop(pz.KEEP_VARIABLE, None)
    if keep:
        env[pz.KEEP_VARIABLE] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stderr == ""
    return out.stdout.splitlines()


def test_the_pth_drops_them_at_interpreter_start(tmp_path):
    site = _site(tmp_path)
    path = _interpreter_path(site, keep=False)
    assert str(site) in path and not set(_zips(site)) & set(path)


def test_the_environment_variable_keeps_them(tmp_path):
    site = _site(tmp_path)
    assert set(_zips(site)) <= set(_interpreter_path(site, keep=True))


@pytest.mark.parametrize("entry", ["", "relative/dir"])
def test_relative_and_empty_entries_do_not_break_it(tmp_path, entry):
    site = _site(tmp_path)
    assert pz.duplicate_zips([*_zips(site), entry, str(site)]) == _zips(site)


def test_the_opt_in_is_idempotent_and_removable(tmp_path, capsys):
    site = tmp_path / "site"
    site.mkdir()
    pth = site / pz.PTH_NAME
    assert pz.main(["status", "--site", str(site)]) == 0
    assert capsys.readouterr().out.startswith("not installed")
    pz.main(["install", "--site", str(site)])
    pz.main(["install", "--site", str(site)])
    assert pth.read_text() == pz.PTH_LINE and [p.name for p in site.iterdir()] == [pz.PTH_NAME]
    assert capsys.readouterr().out.startswith("installed " + str(pth))
    pz.main(["remove", "--site", str(site)])
    assert not pth.exists() and capsys.readouterr().out.startswith("removed")


def test_a_pth_left_behind_after_the_module_is_gone_is_inert(tmp_path):
    """``pip uninstall`` does not know the opt-in's file: without the module, its line does nothing
    and prints nothing (``site`` would print a traceback for an ``ImportError``)."""
    site = _site(tmp_path)
    pz.install(str(site))
    code = f"import sys, site; site.addsitedir({str(site)!r}); print(chr(10).join(sys.path))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(_zips(site)), "PYTHONNOUSERSITE": "1"}
    env.pop(pz.KEEP_VARIABLE, None)
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stderr == "" and set(_zips(site)) <= set(out.stdout.splitlines())
