"""fp8scope_torch: records the GEMM operands of a PyTorch run's linear layers at chosen
steps, for `fp8scope-engine import DIR --out run.h5` and the fp8scope GUI.

    import fp8scope_torch
    cap = fp8scope_torch.capture(model, "capture/", every=100, linears="*.mlp.*")
    for batch in data:
        loss = model(batch); loss.backward(); opt.step(); opt.zero_grad()
        cap.step(loss=loss)
    cap.close()
"""

from .capture import FORMAT, VERSION, Capture, capture

__all__ = ["capture", "Capture", "FORMAT", "VERSION"]
