#include <gtest/gtest.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

using c10::Device;
using c10::DeviceType;
using c10::Stream;
using c10::impl::NoOpDeviceGuardImpl;

// The autograd engine indexes its per-device streams by the device index of
// the streams a device guard returns; an index of -1 for a tensor on device 0
// read outside that table.
TEST(NoOpDeviceGuardImplTest, StreamsKeepTheDeviceIndex) {
  const NoOpDeviceGuardImpl<DeviceType::PrivateUse1> impl;
  const Device device(DeviceType::PrivateUse1, 0);
  const Stream stream(Stream::DEFAULT, device);
  EXPECT_EQ(impl.getStream(device), stream);
  EXPECT_EQ(impl.getStream(device).device_index(), 0);
  EXPECT_EQ(impl.getNewStream(device), stream);
  EXPECT_EQ(impl.exchangeStream(stream), stream);
}

TEST(NoOpDeviceGuardImplTest, UnindexedDevicesAreUnchanged) {
  const NoOpDeviceGuardImpl<DeviceType::CPU> impl;
  const Device cpu(DeviceType::CPU);
  EXPECT_EQ(impl.getStream(cpu), Stream(Stream::DEFAULT, cpu));
  EXPECT_EQ(impl.getDevice(), cpu);
  EXPECT_EQ(impl.deviceCount(), 1);
}

// The engine records no event when the caller's stream and the leaf stream
// are equal, which they now are; events called for anywhere else still raise.
TEST(NoOpDeviceGuardImplTest, EventsStillRaise) {
  const NoOpDeviceGuardImpl<DeviceType::PrivateUse1> impl;
  const Device device(DeviceType::PrivateUse1, 0);
  void* event = nullptr;
  EXPECT_ANY_THROW(impl.record(
      &event,
      impl.getStream(device),
      device.index(),
      c10::EventFlag::PYTORCH_DEFAULT));
  EXPECT_ANY_THROW(impl.queryEvent(event));
}
