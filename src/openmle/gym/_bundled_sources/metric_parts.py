"""The ``evaluate`` bodies of the bundled metrics: parts cut into ``metric.py`` by name."""

import numpy as np


class Bodies:
    def auc(self, y_true, y_pred):
        # [auc]
        y = y_true["churned"].to_numpy() == 1
        s = y_pred["churned"].to_numpy(dtype=float)
        order = np.argsort(s, kind="mergesort")
        ranks = np.empty(len(s))
        ranks[order] = np.arange(1, len(s) + 1)
        for v in np.unique(s):
            tie = s == v
            ranks[tie] = ranks[tie].mean()
        n_pos, n_neg = y.sum(), (~y).sum()
        return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
        # [/auc]

    def rmse(self, y_true, y_pred):
        # [rmse]
        err = y_true["price"].to_numpy(dtype=float) - y_pred["price"].to_numpy(dtype=float)
        return float(np.sqrt(np.mean(err ** 2)))
        # [/rmse]

    def log_loss(self, y_true, y_pred):
        # [log_loss]
        classes = [c for c in y_pred.columns if c != "id"]
        p = y_pred[classes].to_numpy(dtype=float)
        p = np.clip(p / p.sum(axis=1, keepdims=True), 1e-15, 1 - 1e-15)
        cols = [classes.index(c) for c in y_true["cover"]]
        return float(-np.mean(np.log(p[np.arange(len(cols)), cols])))
        # [/log_loss]
