"""Shared fixtures: the model zoo (../shared beside the checkout, or
$SMELT_SHARED_DIR) and a kernel cache per run ($SMELT_CACHE_DIR)."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def shared_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SMELT_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def zoo() -> pathlib.Path:
    d = shared_dir() / "models"
    if not d.is_dir():
        pytest.skip(f"{d} not found (the model zoo lives in ../shared beside the checkout)")
    return d
