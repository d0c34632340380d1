#include <gtest/gtest.h>

#include <c10/core/Allocator.h>
#include <c10/core/Backend.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/TensorOptions.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <sstream>
#include <string>

using c10::Device;
using c10::DeviceType;
using c10::DispatchKey;

namespace {

std::string str(const Device& device) {
  std::ostringstream out;
  out << device;
  return out.str();
}

// The names and keys each slot maps to (slot i is entry i - 1).
struct Slot {
  DeviceType type;
  const char* default_name;
  c10::BackendComponent component;
  DispatchKey dense;
  DispatchKey sparse;
  DispatchKey autograd;
  c10::Backend backend;
};

const Slot kSlots[] = {
    {DeviceType::PrivateUse1,
     "privateuseone",
     c10::BackendComponent::PrivateUse1Bit,
     DispatchKey::PrivateUse1,
     DispatchKey::SparsePrivateUse1,
     DispatchKey::AutogradPrivateUse1,
     c10::Backend::PrivateUse1},
    {DeviceType::PrivateUse2,
     "privateusetwo",
     c10::BackendComponent::PrivateUse2Bit,
     DispatchKey::PrivateUse2,
     DispatchKey::SparsePrivateUse2,
     DispatchKey::AutogradPrivateUse2,
     c10::Backend::PrivateUse2},
    {DeviceType::PrivateUse3,
     "privateusethree",
     c10::BackendComponent::PrivateUse3Bit,
     DispatchKey::PrivateUse3,
     DispatchKey::SparsePrivateUse3,
     DispatchKey::AutogradPrivateUse3,
     c10::Backend::PrivateUse3},
};

} // namespace

// Slot 3 is never renamed in this binary: its default name parses and prints.
TEST(PrivateUseSlotsTest, DefaultNamesParseAndPrint) {
  EXPECT_EQ(c10::kPrivateUseBackendSlots, 3);
  const Device device("privateusethree:1");
  EXPECT_EQ(device.type(), DeviceType::PrivateUse3);
  EXPECT_EQ(device.index(), 1);
  EXPECT_EQ(str(device), "privateusethree:1");
  EXPECT_EQ(
      c10::DeviceTypeName(DeviceType::PrivateUse3, /*lower_case=*/false),
      "PRIVATEUSETHREE");
  EXPECT_FALSE(c10::is_privateuse_backend_registered(DeviceType::PrivateUse3));
  EXPECT_TRUE(c10::is_privateuse_backend_name("privateusethree"));
  EXPECT_FALSE(c10::is_privateuse_backend_name("cpu"));
  for (const auto& slot : kSlots) {
    EXPECT_TRUE(c10::isValidDeviceType(slot.type));
    EXPECT_TRUE(c10::is_privateuse_device_type(slot.type));
  }
  EXPECT_FALSE(c10::is_privateuse_device_type(DeviceType::CPU));
  EXPECT_FALSE(c10::is_privateuse_device_type(DeviceType::MTIA));
}

// Renaming slot 2 changes what parses and prints for it, and only for it.
TEST(PrivateUseSlotsTest, RenameSlotTwo) {
  c10::register_privateuse_backend(DeviceType::PrivateUse2, "acctwo");
  EXPECT_TRUE(c10::is_privateuse_backend_registered(DeviceType::PrivateUse2));
  EXPECT_EQ(c10::get_privateuse_backend(DeviceType::PrivateUse2), "acctwo");
  EXPECT_EQ(
      c10::get_privateuse_backend(DeviceType::PrivateUse2, false), "ACCTWO");
  const Device device("acctwo:2");
  EXPECT_EQ(device.type(), DeviceType::PrivateUse2);
  EXPECT_EQ(device.index(), 2);
  EXPECT_EQ(str(device), "acctwo:2");
  EXPECT_EQ(
      c10::privateuse_backend_of_name("acctwo"),
      std::optional<DeviceType>(DeviceType::PrivateUse2));
  // As "privateuseone" does for PrivateUse1, the default name still parses.
  EXPECT_EQ(Device("privateusetwo:1").type(), DeviceType::PrivateUse2);
  EXPECT_EQ(str(Device("privateusetwo:1")), "acctwo:1");
  // Renaming again to the same name is allowed; to another, an error.
  c10::register_privateuse_backend(DeviceType::PrivateUse2, "acctwo");
  EXPECT_THROW(
      c10::register_privateuse_backend(DeviceType::PrivateUse2, "other"),
      c10::Error);
  EXPECT_EQ(Device("privateusethree").type(), DeviceType::PrivateUse3);
}

// The PrivateUse1 functions are slot 1's.
TEST(PrivateUseSlotsTest, PrivateUse1FunctionsAreSlotOne) {
  c10::register_privateuse1_backend("accone");
  EXPECT_TRUE(c10::is_privateuse1_backend_registered());
  EXPECT_EQ(c10::get_privateuse_backend(DeviceType::PrivateUse1), "accone");
  EXPECT_EQ(c10::get_privateuse1_backend(), "accone");
  EXPECT_EQ(Device("accone:0").type(), DeviceType::PrivateUse1);
  try {
    c10::register_privateuse1_backend("another");
    FAIL() << "renaming PrivateUse1 twice did not raise";
  } catch (const c10::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("has already been set! Current backend: "),
        std::string::npos);
  }
}

// A slot cannot take an in-tree device name or the name another slot has.
TEST(PrivateUseSlotsTest, NamesAreChecked) {
  EXPECT_THROW(
      c10::register_privateuse_backend(DeviceType::PrivateUse3, "cuda"),
      c10::Error);
  const auto slot_one = c10::get_privateuse_backend(DeviceType::PrivateUse1);
  try {
    c10::register_privateuse_backend(DeviceType::PrivateUse3, slot_one);
    FAIL() << "slot 3 took slot 1's name " << slot_one;
  } catch (const c10::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("with the name of PrivateUse1"),
        std::string::npos);
  }
  EXPECT_FALSE(c10::is_privateuse_backend_registered(DeviceType::PrivateUse3));
  EXPECT_THROW(
      c10::register_privateuse_backend(DeviceType::CPU, "x"), c10::Error);
  EXPECT_THROW(c10::privateuse_device_type(0), c10::Error);
  EXPECT_THROW(c10::privateuse_device_type(4), c10::Error);
}

// Device type <-> backend component <-> dispatch key <-> Backend, per slot.
TEST(PrivateUseSlotsTest, MappingsOfEachSlot) {
  for (int i = 1; i <= c10::kPrivateUseBackendSlots; ++i) {
    const auto& slot = kSlots[i - 1];
    SCOPED_TRACE(slot.default_name);
    EXPECT_EQ(c10::privateuse_device_type(i), slot.type);
    EXPECT_EQ(c10::toBackendComponent(slot.type), slot.component);
    const Device device(slot.type, 0);
    EXPECT_EQ(
        c10::TensorOptions().device(device).computeDispatchKey(), slot.dense);
    EXPECT_EQ(
        c10::TensorOptions()
            .device(device)
            .layout(c10::kSparse)
            .computeDispatchKey(),
        slot.sparse);
    EXPECT_EQ(c10::dispatchKeyToDeviceType(slot.dense), slot.type);
    EXPECT_EQ(c10::dispatchKeyToDeviceType(slot.sparse), slot.type);
    EXPECT_EQ(c10::dispatchKeyToBackend(slot.dense), slot.backend);
    EXPECT_EQ(c10::dispatchKeyToBackend(slot.autograd), slot.backend);
    EXPECT_EQ(c10::backendToDispatchKey(slot.backend), slot.dense);
    EXPECT_EQ(c10::backendToDeviceType(slot.backend), slot.type);
    EXPECT_EQ(c10::getAutogradKeyFromBackend(slot.component), slot.autograd);
  }
}

C10_REGISTER_GUARD_IMPL(
    PrivateUse2,
    c10::impl::NoOpDeviceGuardImpl<DeviceType::PrivateUse2>);

// Each slot has its own device guard: registered statically (slot 2) or at
// run time (slot 3), and used by c10::DeviceGuard.
TEST(PrivateUseSlotsTest, GuardRegistrationPerSlot) {
  EXPECT_TRUE(c10::impl::hasDeviceGuardImpl(DeviceType::PrivateUse2));
  EXPECT_EQ(
      c10::impl::getDeviceGuardImpl(DeviceType::PrivateUse2)->type(),
      DeviceType::PrivateUse2);
  EXPECT_FALSE(c10::impl::hasDeviceGuardImpl(DeviceType::PrivateUse3));
  static const c10::impl::NoOpDeviceGuardImpl<DeviceType::PrivateUse3> three;
  const c10::impl::DeviceGuardImplRegistrar registrar(
      DeviceType::PrivateUse3, &three);
  EXPECT_EQ(
      c10::impl::getDeviceGuardImpl(DeviceType::PrivateUse3)->type(),
      DeviceType::PrivateUse3);
  const c10::DeviceGuard guard(Device(DeviceType::PrivateUse3, 0));
  EXPECT_EQ(guard.original_device().type(), DeviceType::PrivateUse3);
}

// Each slot has its own allocator.
TEST(PrivateUseSlotsTest, AllocatorPerSlot) {
  struct NullAllocator final : c10::Allocator {
    explicit NullAllocator(DeviceType type) : type_(type) {}
    c10::DataPtr allocate(size_t /*n*/) override {
      return {nullptr, Device(type_, 0)};
    }
    c10::DeleterFnPtr raw_deleter() const override {
      return nullptr;
    }
    void copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/)
        const override {}
    DeviceType type_;
  };
  static NullAllocator two(DeviceType::PrivateUse2);
  static NullAllocator three(DeviceType::PrivateUse3);
  c10::SetAllocator(DeviceType::PrivateUse2, &two);
  c10::SetAllocator(DeviceType::PrivateUse3, &three);
  EXPECT_EQ(c10::GetAllocator(DeviceType::PrivateUse2), &two);
  EXPECT_EQ(c10::GetAllocator(DeviceType::PrivateUse3), &three);
  EXPECT_EQ(
      c10::GetAllocator(DeviceType::PrivateUse3)->allocate(0).device().type(),
      DeviceType::PrivateUse3);
}
