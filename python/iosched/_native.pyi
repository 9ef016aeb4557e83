"""Type hints of iosched's native module (crates/python, PyO3). Use the package's functions
(iosched.run, iosched.sweep...); these are what they call."""

from typing import Dict, List, Optional, Sequence, Tuple

__version__: str

class IoschedError(Exception):
    """What iosched refused or could not do; the message names the problem and its place."""

def run(
    job_text: str,
    origin: str,
    base_dir: str,
    policy: str,
    device: str,
    seed: int,
    settings: Sequence[Tuple[str, str]],
    device_settings: Sequence[Tuple[str, str]],
    groups: Sequence[str],
    env: Dict[str, str],
) -> str:
    """Runs a job file's text in the simulator; JSON: {"seed", "fio", "series"}."""

def policy_catalog() -> str:
    """JSON: {"queue": [tunable], "stages": [...], "policies": [...]}."""

def device_catalog() -> str:
    """JSON: [{"name", "summary", "parameters": [{"name", "value", "unit", "note"}]}]."""

def experiment_catalog(root: str) -> str:
    """JSON: [{"name", "title", "source", "claim", "runs"}]."""

def run_experiment(root: str, name: str, quick: bool, seed: Optional[int] = None) -> str:
    """Runs one experiment; its results JSON (the study, the verdicts, "pass")."""

def write_output(path: str, data: bytes) -> None:
    """Writes an output as the command does (devices in place, files replaced when complete)."""

class Grid:
    """A sweep's grid."""

    @staticmethod
    def read(path: str) -> "Grid": ...
    @staticmethod
    def parse(text: str, origin: str, base_dir: str) -> "Grid": ...
    @staticmethod
    def from_json(json: str) -> "Grid": ...
    def to_json(self) -> str: ...
    @property
    def title(self) -> str: ...
    def __len__(self) -> int: ...
    def axes(self) -> List[Tuple[str, List[str]]]: ...
    def columns(self) -> List[str]: ...
    def point(self, index: int) -> List[str]: ...
    def run_point(self, index: int) -> str:
        """Runs point `index` without the GIL; its result as JSON."""
    def rows(self, result: str) -> List[List[object]]: ...
    def csv(self, results: Sequence[str]) -> str: ...
    def summary(self, results: Sequence[str], wall_seconds: float) -> str: ...
