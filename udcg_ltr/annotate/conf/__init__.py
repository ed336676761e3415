"""Built-in Hydra configs of the annotation CLI, on its search path (``pkg://udcg_ltr.annotate.conf``).

The project's ``conf/`` folder comes first on the search path, so a ``conf/dataset/<name>.yaml``
there overrides the fallback of the same name here.
"""
