"""The direct-UDCG reranker recipe shared by ``reranker_squad.py`` and ``dynamic_k_squad.py``.

One place builds the ``fit_reranker`` loss from the bench options, so the dynamic-k bench's
cross-fitting folds are trained with exactly the loss of the reranker bench.
"""

from __future__ import annotations

K = 5


def udcg_loss_spec(recipe: dict, k: int = K) -> dict:
    """``{"loss", "loss_kwargs"}`` of the direct-UDCG system from the bench options in ``recipe``.

    ``udcg_ks`` (comma-separated, default ``k``): with several cut-offs the loss is the mean of the
    direct UDCG@k' losses (each Eq. 4 on a NeuralSort top-k' relaxation). UDCG@k is blind to the order
    *inside* the top k; averaging cut-offs 1..k also trains the prefix order that a dynamic-k
    selector reads. ``listnet_weight > 0`` adds ``w * ListNet(utility)``.
    """
    ks = [int(x) for x in str(recipe.get("udcg_ks") or k).split(",") if x]
    direct = {"tau": recipe["tau"], "objective": recipe["objective"]}
    if recipe.get("tau_end"):
        direct["tau_end"] = recipe["tau_end"]
    terms = [{"name": "udcg", "k": kk, "weight": 1.0 / len(ks), **direct} for kk in ks]
    if recipe.get("listnet_weight", 0) > 0:
        terms.append({"name": "listnet", "weight": recipe["listnet_weight"], "tau": recipe["listnet_tau"]})
    if len(terms) == 1:
        return {"loss": "udcg", "loss_kwargs": {"k": ks[0], **direct}}
    return {"loss": "combined", "loss_kwargs": {"terms": terms}}
