"""Adapters: agent frameworks' runs as Clutch agents and ClutchMessages. Each module imports its framework
and is installed with the extra of its name (`pip install 'clutch-client[langgraph]'`)."""
