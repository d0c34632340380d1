r"""Autocast for Python backends: the op lists and cast policies of CPU autocast.

``torch.autocast("<backend>")`` turns on PrivateUse1's autocast dispatch key, for which stock
PyTorch registers only a fallthrough. This module registers, for that key, the operators CPU
autocast registers for its own key in the running torch, each with CPU's cast policy (the
table below, from ``aten/src/ATen/autocast_mode.cpp``). The kernels are C++
(``csrc/acc/Autocast.cpp``); which dtypes a backend accepts is up to its device module
(``get_amp_supported_dtype``).
"""

import torch

from torch_acc import _C

__all__ = ["POLICIES", "register"]

_LOWER_PRECISION_FP = """
    conv1d conv1d.padding conv2d conv2d.padding conv3d conv3d.padding bmm mm linalg_vecdot
    baddbmm addmm _addmm_activation addbmm linear _convolution.deprecated matmul conv_tbc
    mkldnn_rnn_layer conv_transpose1d conv_transpose2d.input conv_transpose3d.input prelu
    scaled_dot_product_attention _native_multi_head_attention
"""
_FP32 = """
    avg_pool3d binary_cross_entropy grid_sampler polar prod prod.dim_int prod.dim_Dimname
    quantile quantile.scalar nanquantile nanquantile.scalar stft stft.center cdist
    grid_sampler_2d _grid_sampler_2d_cpu_fallback grid_sampler_3d trace view_as_complex
    cholesky cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d
    max_unpool2d max_unpool3d adaptive_avg_pool3d reflection_pad1d reflection_pad2d
    replication_pad1d replication_pad2d replication_pad3d mse_loss cosine_embedding_loss
    nll_loss nll_loss2d hinge_embedding_loss poisson_nll_loss smooth_l1_loss
    cross_entropy_loss l1_loss huber_loss margin_ranking_loss soft_margin_loss
    triplet_margin_loss multi_margin_loss ctc_loss.IntList ctc_loss.Tensor kl_div
    multilabel_margin_loss binary_cross_entropy_with_logits fft_fft fft_ifft fft_fft2
    fft_ifft2 fft_fftn fft_ifftn fft_rfft fft_irfft fft_rfft2 fft_irfft2 fft_rfftn fft_irfftn
    fft_hfft fft_ihfft linalg_cond linalg_cond.p_str linalg_matrix_rank
    linalg_matrix_rank.tol_tensor linalg_matrix_rank.atol_rtol_tensor
    linalg_matrix_rank.atol_rtol_float linalg_solve linalg_cholesky linalg_svdvals
    linalg_eigvals linalg_eigvalsh linalg_inv linalg_householder_product linalg_tensorinv
    linalg_tensorsolve fake_quantize_per_tensor_affine geqrf _lu_with_info qr svd
    triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d
    multilabel_margin_loss_forward linalg_qr linalg_cholesky_ex linalg_svd linalg_eig
    linalg_eigh linalg_lstsq linalg_inv_ex linalg_matrix_sqrth
"""
_PROMOTE = "stack cat index_copy index_copy.dimname"

#: The cast policy of every operator overload CPU autocast knows, by aten overload name.
POLICIES: dict[str, str] = {
    **dict.fromkeys(_LOWER_PRECISION_FP.split(), "lower_precision_fp"),
    **dict.fromkeys(_FP32.split(), "fp32"),
    **dict.fromkeys(_PROMOTE.split(), "promote"),
}


def cpu_autocast_ops() -> set[str]:
    """The aten overloads CPU autocast registers kernels for in this torch (``"mm"``...)."""
    return {
        name.removeprefix("aten::")
        for name in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")
        if name.startswith("aten::")
    }


def register() -> list[str]:
    """Register PrivateUse1 autocast kernels for CPU autocast's operators; returns them."""
    cpu = cpu_autocast_ops()
    registered = []
    for policy in ("lower_precision_fp", "fp32", "promote"):
        ops = [op for op, p in POLICIES.items() if p == policy and op in cpu]
        registered += _C.register_autocast_kernels(ops, policy)
    return registered
