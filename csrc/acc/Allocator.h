#pragma once

namespace torch::acc {

// Makes PrivateUse1's allocator one that holds no memory, unless the device
// already has an allocator. A Python backend keeps its data in payloads, so
// `torch.UntypedStorage(n, device=...)` with n > 0 raises an error that says so
// (instead of PyTorch dereferencing a missing allocator).
void registerPayloadAllocator();

} // namespace torch::acc
