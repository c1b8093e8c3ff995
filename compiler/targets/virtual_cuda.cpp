// irscope's virtual CUDA device for a CPU-only build of PyTorch (compiler/targets/virtual_gpu.py).
//
// A CPU build has no CUDA hooks object and no CUDA device guard, so three things fail on tensors
// whose device is "cuda", even fake ones: factory calls such as torch.ones(..., device=x.device)
// ("PyTorch is not linked with support for cuda devices"), the autograd engine (it asks
// at::getAccelerator() for the current stream of every accelerator tensor), and .cuda().
// irscope_install_virtual_cuda() supplies both pieces, for one device and one stream:
//  * CUDA hooks that say CUDA exists (hasCUDA, isBuilt, isAvailable: one device) and initialise
//    nothing. ATen creates its hooks object once, on first use, long before a job's target is
//    known, so the object it already made (the CPU build's CUDAHooksInterface, which has no data
//    members) is given the vtable of VirtualCUDAHooks, a subclass that adds none either.
//  * a DeviceGuardImpl for CUDA: device 0, the default stream, events that complete at once.
// No CUDA library is loaded and no memory is ever allocated on the device: the tensors are fake.
// Pinned to torch 2.13 (tests/test_virtual_gpu_shim.py builds and installs it).
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <typeinfo>

namespace {

constexpr c10::DeviceType kCUDA = c10::DeviceType::CUDA;

struct VirtualCUDAGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kCUDA; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(kCUDA, 0); }
  c10::Device getDevice() const override { return c10::Device(kCUDA, 0); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kCUDA, d.index()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return getStream(s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

struct VirtualCUDAHooks final : public at::CUDAHooksInterface {
  bool hasCUDA() const override { return true; }
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  void init() const override {}
  bool hasPrimaryContext(c10::DeviceIndex) const override { return false; }
};

static_assert(sizeof(VirtualCUDAHooks) == sizeof(at::CUDAHooksInterface),
              "the hooks object is re-typed in place: no data members may be added");

}  // namespace

// 1: installed (or already installed); -1: this PyTorch has real CUDA hooks, left alone.
extern "C" int irscope_install_virtual_cuda() {
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (typeid(hooks) == typeid(VirtualCUDAHooks)) {
    return 1;
  }
  if (typeid(hooks) != typeid(at::CUDAHooksInterface)) {
    return -1;
  }
  static const VirtualCUDAHooks model;
  std::memcpy(const_cast<at::CUDAHooksInterface*>(&hooks), static_cast<const void*>(&model), sizeof(void*));
  static c10::impl::DeviceGuardImplRegistrar guard(kCUDA, new VirtualCUDAGuard());
  return 1;
}
