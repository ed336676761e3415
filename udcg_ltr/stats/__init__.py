"""Statistics over queries: leaves of the package (numpy only, nothing of ours).

* :mod:`~udcg_ltr.stats.groups`: rows grouped by query as a padded ``[G, m]`` layout;
* :mod:`~udcg_ltr.stats.correlation`: per-query Spearman / Kendall tau-b of a metric against outcomes.

Used by the fitting of UDCG_theta and gamma (:mod:`udcg_ltr.fit`) and the correlation study. (The bootstrap,
:mod:`udcg_ltr.analysis.bootstrap`, is the other statistics leaf.)
"""
