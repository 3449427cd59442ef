"""Adapters of the SDK to agent frameworks, each behind an optional extra:
`langchain.py` (`pip install memoryhub[langchain]`) and `llamaindex.py`
(`pip install memoryhub[llamaindex]`). Importing one without its framework installed
raises ImportError naming the extra."""
