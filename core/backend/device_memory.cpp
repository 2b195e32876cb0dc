// The default host snapshot: a copy made at once, for backends whose memory is the host's
// or that have no copy engine of their own.
#include "backend/device_memory.h"

namespace fp8scope {
namespace {

class CopyNow final : public HostSnapshot {
public:
    explicit CopyNow(DeviceMemory& memory) : memory_(memory) {}
    void reserve(std::size_t bytes) override { host_.reserve(bytes); }
    void start(const std::vector<Region>& regions) override {
        std::size_t total = 0;
        for (const Region& r : regions) total += r.bytes;
        host_.resize(total);
        std::size_t at = 0;
        for (const Region& r : regions) {
            memory_.copy_to_host(host_.data() + at, r.src, r.bytes);
            at += r.bytes;
        }
    }
    void wait() override {}
    const std::uint8_t* host() const override { return host_.data(); }

private:
    DeviceMemory& memory_;
    std::vector<std::uint8_t> host_;
};

}  // namespace

std::unique_ptr<HostSnapshot> DeviceMemory::make_host_snapshot(SnapshotStaging) {
    return std::make_unique<CopyNow>(*this);
}

}  // namespace fp8scope
