"""Schema retrieval and datasource routing over a local ONNX sentence embedder.

- ``embedder``: the int8 ONNX all-MiniLM-L6-v2 (tokenizer, session, mean pooling, L2).
- ``index``: a datasource's schema as embedded entries (tables, columns, relationships, plus
  its description and sample questions), stored per datasource and reused while unchanged.
- ``retriever``: MMR over table entries, then over the column and relationship entries of the
  chosen tables; the engine's ``retriever=`` hook.
- ``routing``: ranks the project's datasources for a question; the engine's ``router=`` hook.

Nothing here is imported by the Dagster definitions at load time; onnxruntime is imported only
when the first text is embedded.
"""
