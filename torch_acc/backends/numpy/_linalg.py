"""Linear algebra kernels of the ``npy`` backend (``torch.linalg``), on NumPy and SciPy's LAPACK.

Results have the layout PyTorch's CPU kernels give (LAPACK's column-major matrices in a
contiguous batch), and the LU/pivot/info outputs follow LAPACK's conventions (1-based int32
pivots) as PyTorch's do, since its backward formulas use them.
"""

import functools

import numpy as np
import scipy.linalg
import torch
from scipy.linalg import lapack

from ._common import DEVICE, kind, NUMPY_TO_TORCH, result_type

_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


def _check_float(op: str, *arrays) -> None:
    for a in arrays:
        if np.asarray(a).dtype.kind not in "fc" or np.asarray(a).dtype.itemsize < 4:
            raise RuntimeError(
                f"{op}: Expected a floating point or complex tensor as input. Got "
                f"{str(NUMPY_TO_TORCH[np.asarray(a).dtype]).removeprefix('torch.')} "
                f"({DEVICE} backend)"
            )


def _check_square(op: str, a) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(
            f"{op}: A must be batches of square matrices, but they are "
            f"{a.shape[-2]} by {a.shape[-1]} matrices"
        )


def _fmat(x, dtype=None) -> np.ndarray:
    """``x`` laid out as LAPACK's results: each matrix column-major, the batch contiguous."""
    x = np.asarray(x) if dtype is None else np.asarray(x).astype(dtype, copy=False)
    if x.ndim < 2:
        return np.ascontiguousarray(x) if x.ndim else x.copy()
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)


def _cmat(x, dtype=None) -> np.ndarray:
    x = np.asarray(x) if dtype is None else np.asarray(x).astype(dtype, copy=False)
    return x if x.flags.c_contiguous else x.copy(order="C")


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _flat(x, batch: tuple, core: tuple) -> np.ndarray:
    """``x`` broadcast to ``batch + core``, its batch flattened into one dim."""
    return np.broadcast_to(x, batch + core).reshape((int(np.prod(batch)),) + core)


def _empty(dtype) -> np.ndarray:
    return np.empty((0,), dtype)


def _batches(a, core: int = 2):
    """The batch shape of ``a`` and a reshaped view with one batch dim."""
    batch = a.shape[: a.ndim - core]
    return batch, a.reshape((int(np.prod(batch)),) + a.shape[a.ndim - core :])


# --- LU -------------------------------------------------------------------------------------


def _getrf(m):
    """LAPACK's LU of one matrix: (LU, 1-based int32 pivots, info)."""
    (getrf,) = lapack.get_lapack_funcs(("getrf",), (m,))
    if m.size == 0:
        k = min(m.shape)
        return m.copy(), np.arange(1, k + 1, dtype=_INT32), 0
    lu, piv, info = getrf(m)
    return lu, (piv + 1).astype(_INT32), max(int(info), 0)


def _lu_factor(a):
    batch, flat = _batches(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lus = np.empty(flat.shape, a.dtype)
    pivs = np.empty((flat.shape[0], k), _INT32)
    infos = np.empty((flat.shape[0],), _INT32)
    for i, mat in enumerate(flat):
        lus[i], pivs[i], infos[i] = _getrf(mat)
    return lus.reshape(a.shape), pivs.reshape(batch + (k,)), infos.reshape(batch)


def _linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    _check_float("linalg.lu_factor", A)
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lu_factor: Expected tensor with 2 or more dimensions.")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu, piv, info = _lu_factor(A)
    if check_errors:
        _check_errors(info, "torch.linalg.lu_factor_ex", is_matrix=A.ndim == 2)
    return _fmat(lu), _cmat(piv), _cmat(info)


def _permutation(piv, m: int):
    """``P`` (m x m) of LAPACK pivots with ``A = P L U``, batched."""
    batch = piv.shape[:-1]
    flat = _flat(piv, batch, piv.shape[-1:])
    P = np.zeros((flat.shape[0], m, m))
    for b, p in enumerate(flat):
        perm = np.arange(m)
        for i, j in enumerate(p):
            j = int(j) - 1
            perm[i], perm[j] = perm[j], perm[i]
        P[b, perm, np.arange(m)] = 1
    return P.reshape(batch + (m, m))


def _lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    if unpack_data:
        L = np.tril(LU_data[..., :, :k], -1)
        idx = np.arange(k)
        L[..., idx, idx] = 1
        U = np.triu(LU_data[..., :k, :])
        L, U = _cmat(L), _cmat(U)
    else:
        L = U = _empty(LU_data.dtype)
    if unpack_pivots:
        batch = np.broadcast_shapes(LU_data.shape[:-2], LU_pivots.shape[:-1])
        piv = np.broadcast_to(LU_pivots, batch + (LU_pivots.shape[-1],))
        P = _cmat(_permutation(piv, m), LU_data.dtype)
    else:
        P = _empty(LU_data.dtype)
    return P, L, U


def _linalg_lu(A, *, pivot=True):
    lu, piv, _ = _linalg_lu_factor_ex(A, pivot=pivot)
    return _lu_unpack(lu, piv)


def _lu_matrix(LU, pivots):
    P, L, U = _lu_unpack(LU, pivots)
    return P @ L @ U


def _solve(A, B):
    """``A X = B`` with broadcast batches; singular matrices give inf/nan, not an error."""
    with np.errstate(all="ignore"):
        try:
            return np.linalg.solve(A, B)
        except np.linalg.LinAlgError:
            batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
            A = _flat(A, batch, A.shape[-2:])
            B = _flat(B, batch, B.shape[-2:])
            out = np.empty(B.shape, np.result_type(A, B))
            for i in range(A.shape[0]):
                try:
                    out[i] = np.linalg.solve(A[i], B[i])
                except np.linalg.LinAlgError:
                    out[i] = scipy.linalg.lstsq(A[i], B[i])[0] * np.nan
            return out.reshape(batch + B.shape[-2:])


def _linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    _check_float("linalg.lu_solve", LU, B)
    A = _lu_matrix(LU, pivots).astype(LU.dtype)
    if left:
        X = _solve(_mH(A) if adjoint else A, B)
    else:
        # X A = B  <=>  A^H X^H = B^H
        X = _mH(_solve(A if adjoint else _mH(A), _mH(B)))
        return _cmat(X, result_type(kind(LU), kind(B)))
    return _fmat(X, result_type(kind(LU), kind(B)))


# --- determinants, inverses, solves -----------------------------------------------------------


def _det_of_lu(lu, piv):
    n = lu.shape[-1]
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    swaps = np.sum(piv != np.arange(1, n + 1, dtype=_INT32), axis=-1)
    sign = np.where(swaps % 2 == 1, -1, 1).astype(lu.dtype)
    return diag, sign


def _lu_of_contiguous_transposed(A):
    """LU of A, of A^T where A is contiguous and real (as PyTorch: its backward knows)."""
    return _lu_factor(np.swapaxes(A, -1, -2) if _use_A_T(A) else A)


@functools.cache
def _solve_factors_transpose() -> bool:
    """Whether this PyTorch's CPU ``_linalg_solve_ex`` factors A^T of a contiguous A."""
    A = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    lu = torch.ops.aten._linalg_solve_ex.default(A, A)[1]
    return bool(torch.allclose(lu, torch.linalg.lu_factor(A.mT)[0]))


def _use_A_T(A) -> bool:
    return A.flags.c_contiguous and A.dtype.kind != "c"


def _linalg_det(A):
    _check_float("linalg.det", A)
    _check_square("linalg.det", A)
    lu, piv, _ = _lu_of_contiguous_transposed(A)
    diag, sign = _det_of_lu(lu, piv)
    with np.errstate(all="ignore"):
        det = sign * np.prod(diag, axis=-1)
    return _cmat(det, A.dtype), _fmat(lu), _cmat(piv)


def _linalg_slogdet(A):
    _check_float("linalg.slogdet", A)
    _check_square("linalg.slogdet", A)
    lu, piv, _ = _lu_of_contiguous_transposed(A)
    diag, sign = _det_of_lu(lu, piv)
    with np.errstate(all="ignore"):
        absdiag = np.abs(diag)
        logabsdet = np.sum(np.log(absdiag), axis=-1)
        if A.dtype.kind == "c":
            phase = np.prod(diag / absdiag, axis=-1) * sign
        else:
            phase = np.prod(np.sign(diag), axis=-1) * sign
        phase = np.where(np.any(absdiag == 0, axis=-1), 0, phase)
    real = np.empty((), A.dtype).real.dtype
    return _cmat(phase, A.dtype), _cmat(logabsdet, real), _fmat(lu), _cmat(piv)


def _linalg_inv_ex(A, *, check_errors=False):
    _check_float("linalg.inv", A)
    _check_square("linalg.inv", A)
    _, _, info = _lu_factor(A)
    if check_errors:
        _check_errors(info, "linalg.inv_ex", is_matrix=A.ndim == 2)
    with np.errstate(all="ignore"):
        eye = np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype), A.shape)
        inv = _solve(A, eye)
    return _fmat(inv, A.dtype), _cmat(info)


def _is_vector_rhs(A, B) -> bool:
    return B.ndim == 1 or (A.ndim - 1 == B.ndim and B.shape == A.shape[:-1])


def _linalg_solve_ex(A, B, *, left=True, check_errors=False):
    _check_float("linalg.solve", A, B)
    _check_square("linalg.solve", A)
    dtype = result_type(kind(A), kind(B))
    A, B = A.astype(dtype, copy=False), B.astype(dtype, copy=False)
    vector = _is_vector_rhs(A, B)
    Bm = B[..., None] if vector else B
    if not left:
        Bm = np.swapaxes(Bm, -1, -2) if not vector else Bm
    # PyTorch (up to some version) factors A^T when A is contiguous and real; its backward
    # relies on the convention, so the LU returned here follows the running version's.
    if _solve_factors_transpose():
        lu, piv, info = _lu_of_contiguous_transposed(A)
    else:
        lu, piv, info = _lu_factor(A)
    if check_errors:
        _check_errors(info, "torch.linalg.solve_ex", is_matrix=A.ndim == 2)
    if left:
        X = _solve(A, Bm)
    else:
        X = _solve(np.swapaxes(A, -1, -2), Bm)
        X = X if vector else np.swapaxes(X, -1, -2)
    if vector:
        X = _fmat(X[..., 0])
    else:
        X = _fmat(X) if left else _cmat(X)
    return X, _fmat(lu), _cmat(piv), _cmat(info)


def _check_errors(info, api_name, *, is_matrix):
    info = np.asarray(info)
    bad = np.flatnonzero(info.reshape(-1))
    if bad.size == 0:
        return None
    b = int(bad[0])
    code = int(info.reshape(-1)[b])
    where = "" if is_matrix else f"(Batch element {b}): "
    if code < 0:
        text = f"Argument {-code} has illegal value."
    elif "cholesky" in api_name:
        text = (
            "The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {code} is not positive-definite)."
        )
    elif "inv" in api_name:
        text = (
            f"The diagonal element {code} is zero, the inversion could not be completed "
            "because the input matrix is singular."
        )
    elif "solve" in api_name or "lu" in api_name:
        text = (
            "The solver failed because the input matrix is singular."
            if "solve" in api_name
            else f"U[{code},{code}] is zero, singular U."
        )
    elif "eig" in api_name or "svd" in api_name:
        text = f"The algorithm failed to converge ({code} elements did not converge)."
    else:
        text = f"LAPACK error code {code}."
    raise torch.linalg.LinAlgError(f"{api_name}: {where}{text}")


def _linalg_cholesky_ex(A, *, upper=False, check_errors=False):
    _check_float("linalg.cholesky", A)
    _check_square("linalg.cholesky", A)
    batch, flat = _batches(A)
    out = np.zeros(flat.shape, A.dtype)
    info = np.zeros((flat.shape[0],), _INT32)
    if A.shape[-1]:
        (potrf,) = lapack.get_lapack_funcs(("potrf",), (flat,))
        for i, mat in enumerate(flat):
            c, code = potrf(mat, lower=not upper, clean=True)
            out[i] = c
            info[i] = max(int(code), 0)
    info = info.reshape(batch)
    if check_errors:
        _check_errors(info, "torch.linalg.cholesky_ex", is_matrix=A.ndim == 2)
    return _fmat(out.reshape(A.shape)), _cmat(info)


def _cholesky(self, upper=False):
    L, info = _linalg_cholesky_ex(self, upper=upper)
    _check_errors(info, "cholesky", is_matrix=self.ndim == 2)
    return L


def _cholesky_solve(self, input2, upper=False):
    _check_float("cholesky_solve", self, input2)
    L = input2
    A = _mH(L) @ L if upper else L @ _mH(L)
    return _fmat(_solve(A, self), result_type(kind(self), kind(input2)))


def _cholesky_inverse(self, upper=False):
    _check_float("cholesky_inverse", self)
    A = _mH(self) @ self if upper else self @ _mH(self)
    eye = np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype), A.shape)
    return _fmat(_solve(A, eye), self.dtype)


def _tri_solve(A, B, *, upper: bool, trans: bool = False, unitriangular: bool = False):
    """``op(T) X = B`` for the triangle T of A (LAPACK trtrs, as PyTorch), broadcast batches.

    A singular triangle gives inf/nan, not an error.
    """
    dtype = np.result_type(A.dtype, B.dtype)
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    As = _flat(A.astype(dtype, copy=False), batch, A.shape[-2:])
    Bs = _flat(B.astype(dtype, copy=False), batch, B.shape[-2:])
    out = np.empty(Bs.shape, dtype)
    with np.errstate(all="ignore"):
        for i in range(Bs.shape[0]):
            if Bs[i].size == 0:
                continue
            try:
                out[i] = scipy.linalg.solve_triangular(
                    As[i],
                    Bs[i],
                    trans=1 if trans else 0,
                    lower=not upper,
                    unit_diagonal=unitriangular,
                    check_finite=False,
                )
            except np.linalg.LinAlgError:
                T = np.triu(As[i]) if upper else np.tril(As[i])
                if trans:
                    T = T.T
                out[i] = np.full(Bs[i].shape, np.nan, dtype)
                out[i] = np.linalg.lstsq(T, Bs[i], rcond=None)[0] * np.inf
    return out.reshape(batch + B.shape[-2:])


def _linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    _check_float("linalg.solve_triangular", A, B)
    dtype = result_type(kind(A), kind(B))
    A, B = A.astype(dtype, copy=False), B.astype(dtype, copy=False)
    if left:
        X = _tri_solve(A, B, upper=upper, unitriangular=unitriangular)
    else:
        # X A = B  <=>  A^T X^T = B^T
        X = np.swapaxes(
            _tri_solve(
                A, np.swapaxes(B, -1, -2), upper=upper, trans=True, unitriangular=unitriangular
            ),
            -1,
            -2,
        )
    return _fmat(X, dtype)


def _triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    _check_float("triangular_solve", self, A)
    X = _tri_solve(A, self, upper=upper, trans=transpose, unitriangular=unitriangular)
    batch = np.broadcast_shapes(self.shape[:-2], A.shape[:-2])
    return (
        _fmat(X, self.dtype),
        _fmat(np.broadcast_to(A, batch + A.shape[-2:]).copy()),
    )


# --- decompositions ---------------------------------------------------------------------------


def _linalg_qr(A, mode="reduced"):
    _check_float("linalg.qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
            "(default), 'r', or 'complete'"
        )
    m, n = A.shape[-2:]
    if A.size == 0:
        k = m if mode == "complete" else min(m, n)
        Q = np.broadcast_to(np.eye(m, k, dtype=A.dtype), A.shape[:-2] + (m, k))
        R = np.zeros(A.shape[:-2] + (k, n), A.dtype)
    elif mode == "r":
        R = np.linalg.qr(A, mode="r")
        return _empty(A.dtype), _fmat(R, A.dtype)
    else:
        Q, R = np.linalg.qr(A, mode=mode)
    if mode == "r":
        return _empty(A.dtype), _fmat(R, A.dtype)
    return _fmat(Q, A.dtype), _fmat(R, A.dtype)


def _real(dtype) -> np.dtype:
    return np.empty((), dtype).real.dtype


def _linalg_eigh(A, UPLO="L", compute_v=True):
    _check_float("linalg.eigh", A)
    _check_square("linalg.eigh", A)
    if A.size == 0:
        w = np.zeros(A.shape[:-1], _real(A.dtype))
        v = np.zeros(A.shape, A.dtype)
    elif compute_v:
        w, v = np.linalg.eigh(A, UPLO=UPLO)
    else:
        w = np.linalg.eigvalsh(A, UPLO=UPLO)
    w = _cmat(w, _real(A.dtype))
    return w, (_fmat(v, A.dtype) if compute_v else _empty(A.dtype))


def _linalg_eig(A):
    _check_float("linalg.eig", A)
    _check_square("linalg.eig", A)
    complex_ = np.result_type(A.dtype, np.complex64)
    if A.size == 0:
        w, v = np.zeros(A.shape[:-1], complex_), np.zeros(A.shape, complex_)
    else:
        w, v = np.linalg.eig(A)
    return _cmat(w, complex_), _fmat(v, complex_)


def _linalg_eigvals(A):
    return _linalg_eig(A)[0]


def _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    _check_float("linalg.svd", A)
    m, n = A.shape[-2:]
    k = min(m, n)
    real = _real(A.dtype)
    if A.size == 0:
        S = np.zeros(A.shape[:-2] + (k,), real)
        um, vn = (m, n) if full_matrices else (k, k)
        U = np.broadcast_to(np.eye(m, um, dtype=A.dtype), A.shape[:-2] + (m, um))
        Vh = np.broadcast_to(np.eye(vn, n, dtype=A.dtype), A.shape[:-2] + (vn, n))
    elif compute_uv:
        U, S, Vh = np.linalg.svd(A, full_matrices=full_matrices)
    else:
        S = np.linalg.svd(A, compute_uv=False)
    S = _cmat(S, real)
    if not compute_uv:
        return _empty(A.dtype), S, _empty(A.dtype)
    return _fmat(U, A.dtype), S, _fmat(Vh, A.dtype)


def _reflectors(A, tau, m: int):
    """The m x m product ``H_1 ... H_k`` of the Householder reflectors stored in ``A``."""
    Q = np.eye(m, dtype=A.dtype)
    for i in range(tau.shape[-1]):
        v = np.zeros(m, A.dtype)
        v[i] = 1
        v[i + 1 :] = A[i + 1 :, i]
        Q = Q - tau[i] * np.outer(Q @ v, np.conj(v))
    return Q


def _linalg_householder_product(input, tau):
    _check_float("linalg.householder_product", input, tau)
    m, n = input.shape[-2:]
    batch = np.broadcast_shapes(input.shape[:-2], tau.shape[:-1])
    A = _flat(input, batch, (m, n))
    T = _flat(tau, batch, tau.shape[-1:])
    out = np.empty(A.shape, input.dtype)
    for i in range(A.shape[0]):
        out[i] = _reflectors(A[i], T[i], m)[:, :n]
    return _fmat(out.reshape(batch + (m, n)), input.dtype)


def _geqrf(self):
    _check_float("geqrf", self)
    batch, flat = _batches(self)
    m, n = self.shape[-2:]
    k = min(m, n)
    a = np.empty(flat.shape, self.dtype)
    tau = np.zeros((flat.shape[0], k), self.dtype)
    if self.size:
        (geqrf,) = lapack.get_lapack_funcs(("geqrf",), (flat,))
        for i, mat in enumerate(flat):
            qr, t, _, _ = geqrf(mat)
            a[i], tau[i] = qr, t[:k]
    return _fmat(a.reshape(self.shape)), _cmat(tau.reshape(batch + (k,)))


def _ormqr(self, input2, input3, left=True, transpose=False):
    _check_float("ormqr", self, input2, input3)
    m = self.shape[-2]
    batch = np.broadcast_shapes(self.shape[:-2], input2.shape[:-1], input3.shape[:-2])
    A = _flat(self, batch, self.shape[-2:])
    T = _flat(input2, batch, input2.shape[-1:])
    C = _flat(input3, batch, input3.shape[-2:])
    out = np.empty(C.shape, input3.dtype)
    for i in range(A.shape[0]):
        Q = _reflectors(A[i], T[i], m)
        if transpose:
            Q = np.conj(Q.T)
        out[i] = Q @ C[i] if left else C[i] @ Q
    return _fmat(out.reshape(batch + input3.shape[-2:]), input3.dtype)


def _linalg_lstsq(self, b, rcond=None, *, driver=None):
    _check_float("linalg.lstsq", self, b)
    A, B = self, b
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(
            f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, "
            f"gelss), but got {driver}"
        )
    vector = B.ndim == A.ndim - 1
    Bm = B[..., None] if vector else B
    m, n = A.shape[-2:]
    k = Bm.shape[-1]
    batch = np.broadcast_shapes(A.shape[:-2], Bm.shape[:-2])
    As = _flat(A, batch, (m, n))
    Bs = _flat(Bm, batch, (m, k))
    eps = np.finfo(A.dtype).eps
    cond = rcond if rcond is not None else eps * max(m, n)
    sol = np.zeros((As.shape[0], max(m, n), k), A.dtype)
    ranks = np.zeros((As.shape[0],), _INT64)
    svals = np.zeros((As.shape[0], min(m, n)), _real(A.dtype))
    lapack_driver = "gelsy" if driver == "gels" else driver
    with np.errstate(all="ignore"):
        for i in range(As.shape[0]):
            if As[i].size == 0:
                continue
            x, _, r, s = scipy.linalg.lstsq(
                As[i], Bs[i], cond=cond, lapack_driver=lapack_driver, check_finite=False
            )
            sol[i, :n] = x
            ranks[i] = r
            if s is not None:
                svals[i] = s
    solution = _fmat(sol.reshape(batch + (max(m, n), k)))[..., :n, :]
    full_rank = driver == "gels" or bool(np.all(ranks == n))
    if m > n and driver != "gelsy" and full_rank:
        resid = np.sum(np.abs(Bs - As @ sol[:, :n]) ** 2, axis=-2).reshape(batch + (k,))
        residuals = _cmat(resid[..., 0] if vector else resid, _real(A.dtype))
    else:
        residuals = _empty(_real(A.dtype))
    rank = _cmat(ranks.reshape(batch)) if driver != "gels" else _empty(_INT64)
    if driver in ("gelsd", "gelss"):
        singular_values = _cmat(svals.reshape(batch + (min(m, n),)))
    else:
        singular_values = _empty(_real(A.dtype))
    if vector:
        solution = _cmat(solution[..., 0])
    return solution, residuals, rank, singular_values


def _linalg_pinv(self, *, atol=None, rtol=None, hermitian=False):
    _check_float("linalg.pinv", self)
    m, n = self.shape[-2:]
    real = _real(self.dtype)
    if self.size == 0:
        return _cmat(np.zeros(self.shape[:-2] + (n, m), self.dtype))
    if rtol is None:
        rtol = 0.0 if atol is not None else np.finfo(real).eps * max(m, n)
    atol = 0.0 if atol is None else atol
    atol, rtol = np.asarray(atol, real), np.asarray(rtol, real)
    with np.errstate(all="ignore"):
        if hermitian:
            w, v = np.linalg.eigh(self)
            smax = np.max(np.abs(w), axis=-1, keepdims=True)
            tol = np.maximum(atol[..., None], rtol[..., None] * smax)
            winv = np.where(np.abs(w) > tol, 1 / w, 0).astype(w.dtype)
            out = (v * winv[..., None, :]) @ _mH(v)
        else:
            U, S, Vh = np.linalg.svd(self, full_matrices=False)
            smax = S[..., :1]
            tol = np.maximum(atol[..., None], rtol[..., None] * smax)
            sinv = np.where(S > tol, 1 / S, 0).astype(S.dtype)
            out = (_mH(Vh) * sinv[..., None, :]) @ _mH(U)
    return _cmat(out, self.dtype)


# linalg.matrix_exp as ATen computes it (Bader, Blanes and Casas, "Computing the Matrix
# Exponential with an Optimized Taylor Polynomial Approximation", 2019): a Taylor approximant
# of degree 1, 2, 4, 8, 12 or 18 chosen by the 1-norm, with scaling and squaring above the
# last bound. Computed in the input's precision, with ATen's bounds for it, so that float32
# results carry the error CPU's do (SciPy's expm in float64 differs from them by up to 0.2%).
_MEXP_THETAS = {
    4: (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
        5.800524627688768e-01, 1.461661507209034e+00, 3.010066362817634e+00),
    8: (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
        4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e+00),
}
_MEXP_B12 = (
    (9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
    (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031,
     0.01108844528519167989),
    (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968,
     0.00610700528898058230),
    (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079,
     -0.00675951846863086359),
)
_MEXP_B18 = (
    (0., -1.00365581030144618291e-01, -8.02924648241156932449e-03,
     -8.92138498045729985177e-04, 0.),
    (0., 3.97849749499645077844e-01, 1.36783778460411720168e+00,
     4.98289622525382669416e-01, -6.37898194594723280150e-04),
    (-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
     -6.98210122488052056106e-03, 3.34975017086070470649e-05),
    (-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
     2.95552570429315521194e-02, -1.39180257516060693404e-05),
    (0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02,
     -1.40086798182036094347e-05),
)


def _mexp_matmul(a, b):
    """``a @ b`` for batches of square matrices, summed as ATen's CPU ``bmm`` sums them: below
    400 multiply-adds per matrix it accumulates over k in order in the input's precision,
    which the squarings of a large-norm matrix amplify past float32's tolerances when summed
    otherwise; above, both call BLAS."""
    n = a.shape[-1]
    if n * n * n >= 400:
        return a @ b
    out = np.zeros(a.shape, a.dtype)
    for k in range(n):
        out += a[..., :, k, None] * b[..., None, k, :]
    return out


def _mexp_powers(a, count):
    """[I, A, A^2, A^3, A^6][:count] for a batch ``a`` of shape (B, n, n)."""
    powers = [np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape), a]
    if count > 2:
        powers.append(_mexp_matmul(a, a))
    if count > 3:
        powers.append(_mexp_matmul(a, powers[2]))
    if count > 4:
        powers.append(_mexp_matmul(powers[3], powers[3]))
    return powers[:count]


@functools.cache
def _cpu_combination_fuses() -> bool:
    """Whether this torch build's CPU ``_compute_linear_combination`` kernel fuses its
    ``out += input * coefficient`` into one rounding (a compiler may contract it into an FMA:
    torch 2.6's wheels do, 2.13's CPU wheel does not). Asked of the kernel itself: with
    x = 1 + 2**-12, x * x - (1 + 2**-11) is 2**-24 fused and 0 rounded twice."""
    x = 1 + 2**-12
    out = torch._compute_linear_combination(
        torch.tensor([[-(1 + 2**-11)], [x]]), torch.tensor([[1.0, x]]))
    return out.item() != 0


def _mexp_combination(powers, coefficients):
    """sum(c * p), accumulated in order as ATen's ``_compute_linear_combination`` does,
    fused where this torch's CPU kernel is (emulated in a wider type)."""
    dtype = powers[0].dtype
    real = _real(dtype)
    wide = dtype
    if _cpu_combination_fuses():
        wide = np.result_type(dtype, np.float64 if real.itemsize == 4 else np.longdouble)
    out = np.zeros(powers[0].shape, dtype)
    for c, p in zip(coefficients, powers, strict=True):
        out = (out.astype(wide) + _real(wide).type(real.type(c)) * p.astype(wide)).astype(dtype)
    return out


def _mexp_t8_coefficients(real):
    """compute_T8's constants: C++ folds them in double from the float-rounded ones."""
    sqrt_177 = float(real.type(0.1330413469565007072504e+2))
    x3 = float(real.type(2.0 / 3.0))
    values = (x3 * ((1.0 + sqrt_177) / 88.0), x3 * ((1.0 + sqrt_177) / 352.0),
              (-271.0 + 29.0 * sqrt_177) / (315.0 * x3), (-11.0 + 11.0 * sqrt_177) / (1260.0 * x3),
              (-99.0 + 11.0 * sqrt_177) / (5040.0 * x3), (89.0 - sqrt_177) / (5040.0 * x3),
              (857.0 - 58.0 * sqrt_177) / 630.0)
    return (x3, *(real.type(v) for v in values))


def _mexp_taylor(a, degree):
    if degree == 1:
        i, a1 = _mexp_powers(a, 2)
        return i + a1
    if degree == 2:
        i, a1, a2 = _mexp_powers(a, 3)
        return i + a1 + a2 / _real(a.dtype).type(2.0)
    if degree == 4:
        p = _mexp_powers(a, 3)
        x = _mexp_matmul(p[2], _mexp_combination(p, (1 / 2.0, 1 / 6.0, 1 / 24.0)))
        return _mexp_combination(p + [x], (1.0, 1.0, 0.0, 1.0))
    if degree == 8:
        x3, x1, x2, x4, x5, x6, x7, y2 = _mexp_t8_coefficients(_real(a.dtype))
        p = _mexp_powers(a, 3)
        a4 = _mexp_matmul(p[2], _mexp_combination(p[1:], (x1, x2)))
        a8 = _mexp_matmul(_mexp_combination([p[2], a4], (x3, 1.0)),
                          _mexp_combination(p + [a4], (x4, x5, x6, x7)))
        return _mexp_combination(p + [a4, a8], (1.0, 1.0, y2, 0.0, 1.0))
    if degree == 12:
        p = _mexp_powers(a, 4)
        b = [_mexp_combination(p, row) for row in _MEXP_B12]
        b[2] += _mexp_matmul(b[3], b[3])
        return b[0] + _mexp_matmul(b[1] + b[2], b[2])
    p = _mexp_powers(a, 5)
    b = [_mexp_combination(p, row) for row in _MEXP_B18]
    b[3] += _mexp_matmul(b[0], b[4])
    return b[1] + _mexp_matmul(b[2] + b[3], b[3])


def _mexp_scale_square(a, norm, theta):
    real = norm.dtype.type
    with np.errstate(divide="ignore"):
        s = np.maximum(np.ceil(np.log2(norm / real(theta))), real(0))
    out = _mexp_taylor(a * np.power(real(2), -s)[:, None, None], 18)
    for k, times in enumerate(s.astype(np.int64)):
        for _ in range(times):
            out[k] = _mexp_matmul(out[k], out[k])
    return out


def _linalg_matrix_exp(self):
    _check_float("linalg.matrix_exp", self)
    _check_square("linalg.matrix_exp", self)
    n = self.shape[-1]
    if self.size == 0 or n == 0:
        return _cmat(self.copy())
    if n == 1:
        return _cmat(np.exp(self))
    a = np.ascontiguousarray(self).reshape(-1, n, n)
    thetas = _MEXP_THETAS[_real(a.dtype).itemsize]
    with np.errstate(all="ignore"):
        norm = np.abs(a).sum(axis=-2).max(axis=-1)
        # A norm that is not finite (an inf or a NaN in the matrix) gives NaNs, as ATen's
        # degree selection does for a single matrix; squaring an infinite number of times
        # has no answer.
        finite = np.isfinite(norm)
        out = np.full(a.shape, np.nan, a.dtype)
        if a.shape[0] > 1:
            if finite.any():
                out[finite] = _mexp_scale_square(a[finite], norm[finite], thetas[-1])
        elif finite[0]:
            bounds = (-1.0,) + thetas
            for degree, low, high in zip((1, 2, 4, 8, 12), bounds, thetas, strict=False):
                if low < norm[0] <= high:
                    out = _mexp_taylor(a, degree)
            if norm[0] >= thetas[-2]:
                out = _mexp_scale_square(a, norm, thetas[-1])
    return _cmat(out.reshape(self.shape), self.dtype)


def _linalg_cross(self, other, *, dim=-1):
    dtype = result_type(kind(self), kind(other))
    shape = np.broadcast_shapes(self.shape, other.shape)
    ndim = len(shape)
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
            f"but got {dim})"
        )
    if self.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got "
            f"{self.shape[dim]} and {other.shape[dim]}"
        )
    a = np.broadcast_to(self, shape).astype(dtype)
    b = np.broadcast_to(other, shape).astype(dtype)
    return _cmat(np.cross(a, b, axis=dim % ndim), dtype)


def _linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False):
    _check_float("linalg.ldl_factor", self)
    _check_square("linalg.ldl_factor", self)
    batch, flat = _batches(self)
    n = self.shape[-1]
    ld = np.zeros(flat.shape, self.dtype)
    piv = np.zeros((flat.shape[0], n), _INT32)
    info = np.zeros((flat.shape[0],), _INT32)
    name = "hetrf" if hermitian and self.dtype.kind == "c" else "sytrf"
    if n:
        (trf,) = lapack.get_lapack_funcs((name,), (flat,))
        for i, mat in enumerate(flat):
            lu, p, code = trf(mat, lower=1)
            ld[i] = np.tril(lu)
            piv[i] = p
            info[i] = max(int(code), 0)
    info = info.reshape(batch)
    if check_errors:
        _check_errors(info, "torch.linalg.ldl_factor_ex", is_matrix=self.ndim == 2)
    return _fmat(ld.reshape(self.shape)), _cmat(piv.reshape(batch + (n,))), _cmat(info)


def _linalg_ldl_solve(LD, pivots, B, *, hermitian=False):
    _check_float("linalg.ldl_solve", LD, B)
    dtype = result_type(kind(LD), kind(B))
    batch = np.broadcast_shapes(LD.shape[:-2], pivots.shape[:-1], B.shape[:-2])
    n, k = B.shape[-2:]
    L = _flat(LD.astype(dtype, copy=False), batch, LD.shape[-2:])
    P = _flat(pivots, batch, pivots.shape[-1:])
    Bs = _flat(B.astype(dtype, copy=False), batch, (n, k))
    out = np.empty(Bs.shape, dtype)
    name = "hetrs" if hermitian and np.dtype(dtype).kind == "c" else "sytrs"
    (trs,) = lapack.get_lapack_funcs((name,), (Bs,))
    for i in range(Bs.shape[0]):
        if Bs[i].size == 0:
            continue
        x, _ = trs(L[i], P[i], Bs[i], lower=1)
        out[i] = x
    return _fmat(out.reshape(batch + (n, k)))


KERNELS = {
    "linalg_lu_factor_ex": _linalg_lu_factor_ex,
    "linalg_lu": _linalg_lu,
    "lu_unpack": _lu_unpack,
    "linalg_lu_solve": _linalg_lu_solve,
    "_linalg_det": _linalg_det,
    "_linalg_slogdet": _linalg_slogdet,
    "linalg_inv_ex": _linalg_inv_ex,
    "_linalg_solve_ex": _linalg_solve_ex,
    "_linalg_check_errors": _check_errors,
    "linalg_cholesky_ex": _linalg_cholesky_ex,
    "cholesky_solve": _cholesky_solve,
    "cholesky_inverse": _cholesky_inverse,
    "linalg_solve_triangular": _linalg_solve_triangular,
    "triangular_solve": _triangular_solve,
    "linalg_qr": _linalg_qr,
    "_linalg_eigh": _linalg_eigh,
    "linalg_eig": _linalg_eig,
    "_linalg_eigvals": _linalg_eigvals,
    "cholesky": _cholesky,
    "_linalg_svd": _linalg_svd,
    "linalg_householder_product": _linalg_householder_product,
    "geqrf": _geqrf,
    "ormqr": _ormqr,
    "linalg_lstsq": _linalg_lstsq,
    "linalg_pinv.atol_rtol_tensor": _linalg_pinv,
    "linalg_matrix_exp": _linalg_matrix_exp,
    "linalg_cross": _linalg_cross,
    "linalg_ldl_factor_ex": _linalg_ldl_factor_ex,
    "linalg_ldl_solve": _linalg_ldl_solve,
}
