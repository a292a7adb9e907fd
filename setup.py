"""Everything about the build is in ``pyproject.toml`` but one file: the wheel carries
``spark_windowing_pyspark_zip.pth`` at site-packages' root (why: ``spark_windowing_pyspark_zip.py``).
setuptools has no declarative way to put a file there."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "spark_windowing_pyspark_zip.pth"


class BuildPyWithPth(build_py):
    """``build_py``, plus the ``.pth`` file copied to the root of the build (the wheel's root)."""

    def run(self) -> None:
        super().run()
        self.copy_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), PTH),
                       os.path.join(self.build_lib, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
