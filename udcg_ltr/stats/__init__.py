"""Statistics over queries: leaves of the package (numpy, scipy inside the functions; nothing of ours): rows grouped
by query (:mod:`~udcg_ltr.stats.groups`), per-query rank correlations (:mod:`~udcg_ltr.stats.correlation`), bootstrap
CIs and tests (:mod:`~udcg_ltr.stats.bootstrap`) and paired tests (:mod:`~udcg_ltr.stats.paired`)."""
