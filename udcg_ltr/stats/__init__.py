"""Statistics over queries: leaves of the package (numpy, scipy inside the functions; nothing of ours).

* :mod:`~udcg_ltr.stats.groups`: rows grouped by query as a padded ``[G, m]`` layout;
* :mod:`~udcg_ltr.stats.correlation`: per-query Spearman / Kendall tau-b of a metric against outcomes;
* :mod:`~udcg_ltr.stats.bootstrap`: bootstrap CIs of means over queries, the paired bootstrap test, paired ratios;
* :mod:`~udcg_ltr.stats.paired`: Wilcoxon signed-rank, McNemar's exact test and Cochran's Q on paired outcomes.
"""
