"""Pydantic models generated from the daemon's JSON Schemas (docs/schemas/), one module per schema:
`envelope.ClutchMessage`, `agent_card.AgentCard`, `task_view.TaskView`, ... Do not edit them by hand:
tests/core/test_models.py regenerates them (`UPDATE_SCHEMAS=1`) and fails when they drift."""
