// CUPTI is loaded at run time (dlopen): an engine built with CUDA runs where the driver
// and runtime are installed without CUPTI, and then says so instead of failing to start.
#include "cuda/runtime/kernel_tracer.h"

#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "util/clock.h"
#include "util/kernel_name.h"

namespace fp8scope::cuda {
namespace {

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr CUpti_ExternalCorrelationKind kScopeKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
// CUPTI writes an external correlation record only before an API record (runtime or
// driver call): those are enabled for the scopes and then skipped.
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,  CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

// The CUPTI entry points the tracer uses.
struct Cupti {
    decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
    decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
    decltype(&cuptiActivityEnable) enable = nullptr;
    decltype(&cuptiActivityDisable) disable = nullptr;
    decltype(&cuptiActivityFlushAll) flush_all = nullptr;
    decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
    decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
    decltype(&cuptiActivityPushExternalCorrelationId) push = nullptr;
    decltype(&cuptiActivityPopExternalCorrelationId) pop = nullptr;
    decltype(&cuptiGetResultString) result_string = nullptr;
    std::string error;  // why CUPTI could not be loaded

    std::string text(CUptiResult r) const {
        const char* s = nullptr;
        if (result_string && result_string(r, &s) == CUPTI_SUCCESS && s) return s;
        return "CUPTI error " + std::to_string(int(r));
    }
};

const Cupti& cupti() {
    static const Cupti api = [] {
        Cupti c;
        void* lib = nullptr;
        for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                                 "/usr/local/cuda/lib64/libcupti.so.13"})
            if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
        if (!lib) {
            c.error = "libcupti.so.13 was not found (install CUDA 13's CUPTI, or add the directory that holds it, "
                      "e.g. /usr/local/cuda/extras/CUPTI/lib64, to LD_LIBRARY_PATH)";
            return c;
        }
        auto load = [&](auto& fn, const char* symbol) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
            if (!fn && c.error.empty()) c.error = std::string("libcupti lacks ") + symbol + " (CUPTI of CUDA 13 needed)";
        };
        load(c.register_callbacks, "cuptiActivityRegisterCallbacks");
        load(c.register_timestamp, "cuptiActivityRegisterTimestampCallback");
        load(c.enable, "cuptiActivityEnable");
        load(c.disable, "cuptiActivityDisable");
        load(c.flush_all, "cuptiActivityFlushAll");
        load(c.next_record, "cuptiActivityGetNextRecord");
        load(c.dropped, "cuptiActivityGetNumDroppedRecords");
        load(c.push, "cuptiActivityPushExternalCorrelationId");
        load(c.pop, "cuptiActivityPopExternalCorrelationId");
        load(c.result_string, "cuptiGetResultString");
        return c;
    }();
    return api;
}

// The host's clock for every CUPTI timestamp: kernel records and CPU op records agree.
std::uint64_t CUPTIAPI host_clock() { return static_cast<std::uint64_t>(now_ns()); }

const char* copy_name(std::uint8_t kind) {
    switch (kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
        default: return "memcpy";
    }
}

}  // namespace

struct KernelTracer::State {
    std::mutex mu;                 // everything below
    KernelListener* listener = nullptr;
    std::atomic<bool> active{false};
    bool callbacks = false;        // registered with CUPTI (once per process)
    struct Pending {
        KernelTiming timing;       // name: points into `names` or a literal
        std::uint32_t correlation = 0;
    };
    std::vector<Pending> pending;
    std::unordered_map<std::uint32_t, std::uint64_t> scopes;  // correlation id -> scope
    std::unordered_map<const char*, std::string> names;       // CUPTI's name -> display name
    std::int64_t dropped = 0;

    const std::string& name_of(const char* mangled) {
        auto it = names.find(mangled);
        if (it == names.end()) it = names.emplace(mangled, kernel_display_name(mangled ? mangled : "?")).first;
        return it->second;
    }
    void parse(std::uint8_t* buffer, std::size_t valid);
};

void KernelTracer::State::parse(std::uint8_t* buffer, std::size_t valid) {
    CUpti_Activity* record = nullptr;
    while (cupti().next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
        Pending p;
        KernelTiming& t = p.timing;
        switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_KERNEL:
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
                const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
                t.kind = KernelTiming::Kind::Kernel;
                t.name = name_of(k->name);
                t.device = int(k->deviceId), t.stream = k->streamId;
                t.start_ns = std::int64_t(k->start), t.end_ns = std::int64_t(k->end);
                p.correlation = k->correlationId;
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMCPY: {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
                t.kind = KernelTiming::Kind::Memcpy;
                t.name = copy_name(m->copyKind);
                t.device = int(m->deviceId), t.stream = m->streamId;
                t.start_ns = std::int64_t(m->start), t.end_ns = std::int64_t(m->end);
                t.bytes = std::int64_t(m->bytes);
                p.correlation = m->correlationId;
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMSET: {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
                t.kind = KernelTiming::Kind::Memset;
                t.name = "memset";
                t.device = int(m->deviceId), t.stream = m->streamId;
                t.start_ns = std::int64_t(m->start), t.end_ns = std::int64_t(m->end);
                t.bytes = std::int64_t(m->bytes);
                p.correlation = m->correlationId;
                break;
            }
            case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
                const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
                if (e->externalKind == kScopeKind) scopes[e->correlationId] = e->externalId;
                continue;
            }
            default: continue;
        }
        pending.push_back(p);
    }
}

namespace {

KernelTracer::State* g_state = nullptr;  // for CUPTI's C callbacks

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
    if (g_state && buffer) {
        std::lock_guard lock(g_state->mu);
        if (g_state->active) g_state->parse(buffer, valid);
        std::size_t dropped = 0;
        if (cupti().dropped(ctx, stream, &dropped) == CUPTI_SUCCESS) g_state->dropped += std::int64_t(dropped);
    }
    std::free(buffer);
}

}  // namespace

KernelTracer& KernelTracer::instance() {
    static KernelTracer tracer;
    return tracer;
}

KernelTracer::State& KernelTracer::state() const {
    static State s;
    return s;
}

bool KernelTracer::active() const { return state().active.load(std::memory_order_relaxed); }

std::string KernelTracer::start(KernelListener* listener) {
    if (!listener) {
        stop();
        return "";
    }
    const Cupti& api = cupti();
    if (!api.error.empty()) return api.error;
    State& s = state();
    {
        std::lock_guard lock(s.mu);
        if (s.listener) return "kernel timing is already on for another run of this process";
        g_state = &s;
        if (!s.callbacks) {
            if (CUptiResult r = api.register_timestamp(host_clock); r != CUPTI_SUCCESS)
                return "CUPTI refused the host clock: " + api.text(r);
            if (CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
                return "CUPTI refused its buffers: " + api.text(r);
            s.callbacks = true;
        }
    }
    for (CUpti_ActivityKind k : kKinds) {
        CUptiResult r = api.enable(k);
        if (r == CUPTI_SUCCESS) continue;
        for (CUpti_ActivityKind d : kKinds) api.disable(d);
        if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
            return "CUPTI is not permitted for this user (" + api.text(r) +
                   "): run as root, or load the NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0";
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            return "another profiler holds CUPTI (" + api.text(r) +
                   "): run without Nsight Systems/Compute attached, or with --no-kernel-timings";
        return "CUPTI could not trace kernels: " + api.text(r);
    }
    std::lock_guard lock(s.mu);
    s.listener = listener;
    s.dropped = 0;
    s.active = true;
    return "";
}

void KernelTracer::stop() {
    State& s = state();
    if (!s.active) return;
    flush();
    for (CUpti_ActivityKind k : kKinds) cupti().disable(k);
    std::lock_guard lock(s.mu);
    s.active = false;
    s.listener = nullptr;
    s.pending.clear();
    s.scopes.clear();
}

void KernelTracer::begin_scope(std::uint64_t scope) {
    if (active()) cupti().push(kScopeKind, scope);
}

void KernelTracer::end_scope() {
    std::uint64_t last = 0;
    if (active()) cupti().pop(kScopeKind, &last);
}

void KernelTracer::flush() {
    State& s = state();
    if (!s.active) return;
    cupti().flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::vector<KernelTiming> out;
    KernelListener* listener = nullptr;
    {
        std::lock_guard lock(s.mu);
        listener = s.listener;
        out.reserve(s.pending.size());
        for (State::Pending& p : s.pending) {
            if (auto it = s.scopes.find(p.correlation); it != s.scopes.end()) {
                p.timing.scope = it->second;
                s.scopes.erase(it);
            }
            out.push_back(p.timing);
        }
        s.pending.clear();
        // Correlations of API calls that ran nothing on the device never match a record.
        if (s.scopes.size() > (1u << 20)) s.scopes.clear();
    }
    // Names point into `names`, which only grows: valid after the lock.
    if (listener && !out.empty()) listener->on_kernels(out.data(), out.size());
}

std::int64_t KernelTracer::dropped() const {
    std::lock_guard lock(state().mu);
    return state().dropped;
}

}  // namespace fp8scope::cuda
