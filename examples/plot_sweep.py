"""
A parameter sweep
=================

``meanfield.sweep.run(func, grid, seeds, store)`` runs ``func(params, seed)`` over a grid times
seeds, keeps every finished task in a resumable store, and returns a ``SweepResult``
(``client="local"`` runs it on a Dask cluster instead of in this process). Here: the number of
clusters of 64 tokens on S^2 after T = 10, as β grows.
"""
import tempfile

import matplotlib.pyplot as plt

from meanfield import sweep

if __name__ == "__main__":      # needed for client="local" (Dask starts worker processes)
    with tempfile.TemporaryDirectory() as store:
        res = sweep.run(sweep.particle_clusters, {"beta": [1.0, 4.0, 9.0, 16.0], "n": [64], "d": [3], "T": [10.0]},
                        seeds=3, store=store)
        print(res)
        params, mean = res.aggregate("clusters")
        print(res.to_dataframe().groupby("beta")["clusters"].describe())   # pandas (optional extra)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p["beta"] for p in params], mean, "o-")
    ax.set(xlabel="β", ylabel="mean number of clusters at T = 10", title="64 tokens on S^2, 3 seeds")
    fig.tight_layout()
