"""Parts of the offline model's tabular programs, cut by name into ``tabular.py``.

Each part sits in a small host function so that it is checked in a valid context; only the
lines between its markers are written.
"""

import numpy as np
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression, Ridge

K = 2  # the number of classes (0 for a regression), as in a program
levels: dict[str, list[str]] = {}


def categorical(c, values, blocks):
    # [cat:onehot]
    keep = levels[c][:30]
    blocks.append(np.array([[v == lv for lv in keep] for v in values], dtype=float))
    # [/cat:onehot]
    # [cat:ordinal]
    code = {lv: i for i, lv in enumerate(levels[c])}
    blocks.append(np.array([[code.get(v, -1)] for v in values], dtype=float))
    # [/cat:ordinal]


def features(num_tr, num_te, tr, te):
    # [feature:missing_flags]
    # Flag missing values before filling them.
    miss = np.isnan(num_tr).any(axis=0)
    tr = np.hstack([tr, np.isnan(num_tr[:, miss]).astype(float)])
    te = np.hstack([te, np.isnan(num_te[:, miss]).astype(float)])
    # [/feature:missing_flags]
    # [feature:impute_median]
    # Fill missing numbers with the training median.
    med = np.nanmedian(num_tr, axis=0)
    med = np.where(np.isnan(med), 0.0, med)
    n = num_tr.shape[1]
    tr[:, :n] = np.where(np.isnan(tr[:, :n]), med, tr[:, :n])
    te[:, :n] = np.where(np.isnan(te[:, :n]), med, te[:, :n])
    # [/feature:impute_median]
    # [feature:impute_mean]
    # Fill missing numbers with the training mean.
    mean = np.nanmean(num_tr, axis=0)
    mean = np.where(np.isnan(mean), 0.0, mean)
    n = num_tr.shape[1]
    tr[:, :n] = np.where(np.isnan(tr[:, :n]), mean, tr[:, :n])
    te[:, :n] = np.where(np.isnan(te[:, :n]), mean, te[:, :n])
    # [/feature:impute_mean]
    # [feature:log1p]
    # Signed log1p of the numeric columns (safe for any sign).
    n = num_tr.shape[1]
    tr = np.hstack([tr, np.sign(tr[:, :n]) * np.log1p(np.abs(tr[:, :n]))])
    te = np.hstack([te, np.sign(te[:, :n]) * np.log1p(np.abs(te[:, :n]))])
    # [/feature:log1p]
    # [feature:log]
    # Log of the numeric columns shifted by their training minimum.
    n = num_tr.shape[1]
    low = np.nanmin(tr[:, :n], axis=0)
    with np.errstate(divide='ignore', invalid='ignore'):
        tr = np.hstack([tr, np.log(tr[:, :n] - low)])
        te = np.hstack([te, np.log(te[:, :n] - low)])
    # [/feature:log]
    # [feature:poly2]
    # Pairwise products of the first numeric columns.
    n = min(num_tr.shape[1], 6)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    tr = np.hstack([tr] + [tr[:, i : i + 1] * tr[:, j : j + 1] for i, j in pairs])
    te = np.hstack([te] + [te[:, i : i + 1] * te[:, j : j + 1] for i, j in pairs])
    # [/feature:poly2]
    # [scale]
    mu, sd = np.nanmean(tr, axis=0), np.nanstd(tr, axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    tr, te = (tr - mu) / sd, (te - mu) / sd
    # [/scale]
    return tr, te


def fit_predict(x_tr, y_tr, x_te):
    # [input_check]
    if not (np.all(np.isfinite(x_tr)) and np.all(np.isfinite(x_te))):
        raise ValueError("Input X contains NaN or infinity; impute or transform it first")
    # [/input_check]
    return x_tr


# [proba]
def proba(m, x):
    """Class probabilities in the order of `classes` (a class absent from a fold gets 0)."""
    out = np.zeros((len(x), K))
    out[:, m.classes_.astype(int)] = m.predict_proba(x)
    return out
# [/proba]


# [model:ridge]
def ridge(x_tr, y_tr, x_te, alpha):
    """Closed-form ridge regression; classes are fitted as one-hot targets."""
    xa = np.hstack([x_tr, np.ones((len(x_tr), 1))])
    xb = np.hstack([x_te, np.ones((len(x_te), 1))])
    t = np.eye(K)[y_tr] if K else y_tr[:, None]
    reg = alpha * np.eye(xa.shape[1])
    reg[-1, -1] = 0.0
    w = np.linalg.solve(xa.T @ xa + reg, xa.T @ t)
    out = xb @ w
    if not K:
        return out[:, 0]
    out = np.clip(out, 1e-3, None)
    return out / out.sum(axis=1, keepdims=True)
# [/model:ridge]


# [model:logreg]
def logreg(x_tr, y_tr, x_te, lr, epochs, l2):
    """Softmax regression by full-batch gradient descent (linear regression if no classes)."""
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0) + 1e-9
    a, b = (x_tr - mu) / sd, (x_te - mu) / sd
    a = np.hstack([a, np.ones((len(a), 1))])
    b = np.hstack([b, np.ones((len(b), 1))])
    if not K:
        w = np.zeros(a.shape[1])
        for _ in range(epochs):
            w -= lr * (a.T @ (a @ w - y_tr) / len(a) + l2 * w)
        return b @ w
    t = np.eye(K)[y_tr]
    w = np.zeros((a.shape[1], K))
    for _ in range(epochs):
        z = a @ w
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        w -= lr * (a.T @ (p - t) / len(a) + l2 * w)
    z = b @ w
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)
# [/model:logreg]


# [model:knn]
def knn(x_tr, y_tr, x_te, k, weighted):
    """k-nearest neighbours on standardised features, in chunks."""
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0) + 1e-9
    a, b = (x_tr - mu) / sd, (x_te - mu) / sd
    k = max(1, min(k, len(a)))  # never more neighbours than training rows
    out = []
    for s in range(0, len(b), 500):
        d = ((b[s:s + 500, None, :] - a[None, :, :]) ** 2).sum(axis=2)
        idx = np.argpartition(d, k - 1, axis=1)[:, :k]
        near = np.take_along_axis(d, idx, axis=1)
        w = 1.0 / (np.sqrt(near) + 1e-6) if weighted else np.ones(idx.shape)
        if K:
            votes = np.zeros((len(idx), K))
            for c in range(K):
                votes[:, c] = (w * (y_tr[idx] == c)).sum(axis=1)
            votes += 0.5
            out.append(votes / votes.sum(axis=1, keepdims=True))
        else:
            out.append((w * y_tr[idx]).sum(axis=1) / w.sum(axis=1))
    return np.concatenate(out)
# [/model:knn]


# [model:hgb]
def hgb(x_tr, y_tr, x_te, learning_rate, max_iter, max_leaf_nodes, l2):
    """Histogram gradient boosting (handles missing values natively)."""
    cls = HistGradientBoostingClassifier if K else HistGradientBoostingRegressor
    m = cls(learning_rate=learning_rate, max_iter=max_iter, max_leaf_nodes=max_leaf_nodes,
            l2_regularization=l2, random_state=0)
    m.fit(x_tr, y_tr)
    return proba(m, x_te) if K else m.predict(x_te)
# [/model:hgb]


# [model:rf]
def rf(x_tr, y_tr, x_te, n_estimators, max_depth, min_leaf):
    """Random forest."""
    cls = RandomForestClassifier if K else RandomForestRegressor
    m = cls(n_estimators=n_estimators, max_depth=max_depth, min_samples_leaf=min_leaf,
            random_state=0, n_jobs=1)
    m.fit(x_tr, y_tr)
    return proba(m, x_te) if K else m.predict(x_te)
# [/model:rf]


# [model:et]
def et(x_tr, y_tr, x_te, n_estimators, max_depth, min_leaf):
    """Extremely randomised trees."""
    cls = ExtraTreesClassifier if K else ExtraTreesRegressor
    m = cls(n_estimators=n_estimators, max_depth=max_depth, min_samples_leaf=min_leaf,
            random_state=0, n_jobs=1)
    m.fit(x_tr, y_tr)
    return proba(m, x_te) if K else m.predict(x_te)
# [/model:et]


# [model:linear]
def linear(x_tr, y_tr, x_te, c):
    """Logistic regression for classes, ridge regression for numbers (sklearn)."""
    if K:
        m = LogisticRegression(C=c, max_iter=500)
        m.fit(x_tr, y_tr)
        return proba(m, x_te)
    m = Ridge(alpha=1.0 / c)
    m.fit(x_tr, y_tr)
    return m.predict(x_te)
# [/model:linear]
