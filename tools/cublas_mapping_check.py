#!/usr/bin/env python3
# cublas_mapping_check.py: replays, on the host, the cuBLAS calls that
# kernels/cuda/matmul.cu and kernels/cuda/attention.cu make (copied here by
# hand: keep in step with pz_cuda_gemm_rm and its callers), under cuBLAS's
# column-major definition C = alpha op(A) op(B) + beta C, on flat buffers
# with the same offsets, leading dimensions and batch strides, and compares
# with direct NumPy results (matmul forward/backward; causal attention
# forward, probabilities and the accumulated dqkv). Checks cuBLAS's
# leading-dimension rules too. No GPU needed:  /usr/bin/python3 tools/cublas_mapping_check.py
import numpy as np
rng = np.random.default_rng(0)

def cublas_gemm(opA, opB, m, n, k, alpha, A, offA, lda, B, offB, ldb, beta, C, offC, ldc):
    # column-major: C(m,n) = alpha opA(A)(m,k) opB(B)(k,n) + beta C
    def mat(buf, off, rows, cols, ld):  # column-major rows x cols view
        idx = off + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
        return buf[idx], idx
    # cuBLAS rejects (CUBLAS_STATUS_INVALID_VALUE) leading dimensions below the stored rows
    assert lda >= max(1, m if opA == 'N' else k) and ldb >= max(1, k if opB == 'N' else n) and ldc >= max(1, m)
    Am, _ = mat(A, offA, m if opA == 'N' else k, k if opA == 'N' else m, lda)
    Bm, _ = mat(B, offB, k if opB == 'N' else n, n if opB == 'N' else k, ldb)
    if opA == 'T': Am = Am.T
    if opB == 'T': Bm = Bm.T
    Cm, idx = mat(C, offC, m, n, ldc)
    C[idx] = alpha * (Am @ Bm) + (beta * Cm if beta != 0 else 0)

def gemm_rm(tA, tB, M, N, K, alpha, A, oA, lda, sA, B, oB, ldb, sB, beta, C, oC, ldc, sC, batch):
    for i in range(batch):
        cublas_gemm('T' if tB else 'N', 'T' if tA else 'N', N, M, K, alpha,
                    B, oB + i * sB, ldb, A, oA + i * sA, lda, beta, C, oC + i * sC, ldc)

def softmax_rows(att, rows, T):
    a = att.reshape(rows, T)
    for r in range(rows):
        t = r % T
        x = a[r, :t+1]; e = np.exp(x - x.max()); a[r, :t+1] = e / e.sum(); a[r, t+1:] = 0

def softmax_bwd_rows(d, att, rows, T):
    dd = d.reshape(rows, T); aa = att.reshape(rows, T)
    for r in range(rows):
        t = r % T
        s = (aa[r, :t+1] * dd[r, :t+1]).sum()
        dd[r, :t+1] = aa[r, :t+1] * (dd[r, :t+1] - s); dd[r, t+1:] = 0

def att_fwd(out, att, qkv, B, T, C, NH):
    hs = C // NH; ld = 3 * C; scale = 1 / np.sqrt(hs); TT = T * T
    for b in range(B):
        gemm_rm(False, True, T, T, hs, scale, qkv, b*T*ld, ld, hs, qkv, b*T*ld + C, ld, hs, 0.0, att, b*NH*TT, T, TT, NH)
    softmax_rows(att, B*NH*T, T)
    for b in range(B):
        gemm_rm(False, False, T, hs, T, 1.0, att, b*NH*TT, T, TT, qkv, b*T*ld + 2*C, ld, hs, 0.0, out, b*T*C, C, hs, NH)

def att_bwd(dqkv, scratch, dout, qkv, att, B, T, C, NH):
    hs = C // NH; ld = 3 * C; scale = 1 / np.sqrt(hs); TT = T * T
    for b in range(B):
        gemm_rm(False, True, T, T, hs, 1.0, dout, b*T*C, C, hs, qkv, b*T*ld + 2*C, ld, hs, 0.0, scratch, b*NH*TT, T, TT, NH)
    softmax_bwd_rows(scratch, att, B*NH*T, T)
    for b in range(B):
        seq = b*T*ld
        gemm_rm(False, False, T, hs, T, scale, scratch, b*NH*TT, T, TT, qkv, seq + C, ld, hs, 1.0, dqkv, seq, ld, hs, NH)
        gemm_rm(True, False, T, hs, T, scale, scratch, b*NH*TT, T, TT, qkv, seq, ld, hs, 1.0, dqkv, seq + C, ld, hs, NH)
        gemm_rm(True, False, T, hs, T, 1.0, att, b*NH*TT, T, TT, dout, b*T*C, C, hs, 1.0, dqkv, seq + 2*C, ld, hs, NH)

# reference: autograd-free causal attention
def ref(qkv, dout, B, T, C, NH):
    hs = C // NH
    x = qkv.reshape(B, T, 3, NH, hs)
    q, k, v = x[:, :, 0].transpose(0, 2, 1, 3), x[:, :, 1].transpose(0, 2, 1, 3), x[:, :, 2].transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
    mask = np.tril(np.ones((T, T), bool))
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    o = p @ v  # B NH T hs
    out = o.transpose(0, 2, 1, 3).reshape(B, T, C)
    do = dout.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
    dp = do @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ do
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dq = ds @ k / np.sqrt(hs); dk = ds.transpose(0, 1, 3, 2) @ q / np.sqrt(hs)
    g = np.stack([dq, dk, dv], 2)  # B NH 3 T hs
    dqkv = g.transpose(0, 3, 2, 1, 4).reshape(B, T, 3 * C)
    return out.ravel(), p.ravel(), dqkv.ravel()

for (B, T, C, NH) in [(2, 7, 12, 3), (1, 5, 8, 1), (3, 33, 16, 2)]:
    qkv = rng.standard_normal(B*T*3*C); dout = rng.standard_normal(B*T*C)
    out = np.zeros(B*T*C); att = rng.standard_normal(B*NH*T*T)
    att_fwd(out, att, qkv, B, T, C, NH)
    dq0 = rng.standard_normal(B*T*3*C); dqkv = dq0.copy(); scr = rng.standard_normal(B*NH*T*T)
    att_bwd(dqkv, scr, dout, qkv, att, B, T, C, NH)
    ro, rp, rd = ref(qkv, dout, B, T, C, NH)
    errs = (np.abs(out - ro).max(), np.abs(att - rp).max(), np.abs(dqkv - dq0 - rd).max())
    print('attention B,T,C,NH =', (B, T, C, NH), 'max errors out, att, dqkv:', errs)
    assert max(errs) < 1e-12

# matmul forward/backward
N, C, OC = 5, 7, 9
inp = rng.standard_normal(N*C); W = rng.standard_normal(OC*C); dout = rng.standard_normal(N*OC)
out = np.zeros(N*OC); gemm_rm(False, True, N, OC, C, 1.0, inp, 0, C, 0, W, 0, C, 0, 0.0, out, 0, OC, 0, 1)
e = np.abs(out - (inp.reshape(N, C) @ W.reshape(OC, C).T).ravel()).max(); print('mm fwd', e); assert e < 1e-12
dinp = np.zeros(N*C); gemm_rm(False, False, N, C, OC, 1.0, dout, 0, OC, 0, W, 0, C, 0, 1.0, dinp, 0, C, 0, 1)
e = np.abs(dinp - (dout.reshape(N, OC) @ W.reshape(OC, C)).ravel()).max(); print('mm dinp', e); assert e < 1e-12
dW = np.zeros(OC*C); gemm_rm(True, False, OC, C, N, 1.0, dout, 0, OC, 0, inp, 0, C, 0, 1.0, dW, 0, C, 0, 1)
e = np.abs(dW - (dout.reshape(N, OC).T @ inp.reshape(N, C)).ravel()).max(); print('mm dW', e); assert e < 1e-12
print('ok')
