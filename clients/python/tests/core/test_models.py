"""The client's typed models are generated from the daemon's published JSON Schemas (docs/schemas/, which
the Rust tests keep equal to what the daemon serves), so they cannot drift: this test generates them again
and compares. `UPDATE_SCHEMAS=1` rewrites clutch/schemas/ after a schema changed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon import REPO

SCHEMAS = REPO / "docs" / "schemas"
MODELS = REPO / "clients" / "python" / "clutch" / "schemas"
CODEGEN = Path(sys.executable).parent / "datamodel-codegen"


def module_name(schema: Path) -> str:
    """`clutch.agent.status.v1.schema.json` → `clutch_agent_status_v1`; `agent-card...` → `agent_card`."""
    return schema.name.removesuffix(".schema.json").replace(".", "_").replace("-", "_")


def generate(schema: Path) -> str:
    out = subprocess.run(
        [str(CODEGEN), "--input", str(schema), "--input-file-type", "jsonschema",
         "--output-model-type", "pydantic_v2.BaseModel", "--disable-timestamp",
         "--formatters", "black", "isort", "--use-annotated", "--use-double-quotes",
         "--target-python-version", "3.10"],
        check=True, capture_output=True, text=True,
    ).stdout
    return out.replace(f"#   filename:  {schema.name}\n", f"#   filename:  docs/schemas/{schema.name}\n")


@pytest.mark.skipif(not CODEGEN.exists(), reason="datamodel-codegen is in the core test venv only")
def test_models_are_generated_from_the_published_schemas():
    schemas = sorted(SCHEMAS.glob("*.schema.json"))
    assert len(schemas) > 40, "docs/schemas/ should hold the daemon's schemas"
    stale = []
    for schema in schemas:
        want = generate(schema)
        path = MODELS / f"{module_name(schema)}.py"
        if os.environ.get("UPDATE_SCHEMAS"):
            path.write_text(want)
        elif not path.exists() or path.read_text() != want:
            stale.append(path.name)
    known = {f"{module_name(s)}.py" for s in schemas} | {"__init__.py"}
    extra = sorted(p.name for p in MODELS.glob("*.py") if p.name not in known)
    assert not stale, f"models out of date with docs/schemas (run with UPDATE_SCHEMAS=1): {stale}"
    assert not extra, f"models of schemas that no longer exist: {extra}"
