// libFuzzer harness of the Transformer Engine statistics log reader and its conversion to
// trace records: any bytes parse into values, warnings, notices and errors (never an
// exception), and every record the conversion makes fits its trace metadata.
#include <cstdlib>
#include <sstream>
#include <string>

#include "te_log.h"
#include "te_log_trace.h"

namespace {
// A sink that checks each record against the metadata, as the trace writer does.
class CheckingSink : public fp8scope::trace::RecordSink {
public:
    explicit CheckingSink(const fp8scope::trace::TraceMeta& m) : m_(m) {}
    void write(fp8scope::trace::Record r) override {
        if (!fp8scope::trace::check_record(m_, m_.ops.size(), r).empty()) std::abort();
    }

private:
    const fp8scope::trace::TraceMeta& m_;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace fp8scope::te_log;
    Log log;
    log.files.push_back({"fuzz.log", 0});
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    std::vector<Issue> errors;
    parse_log(log, 0, in, errors);
    if (log.values.empty()) return 0;
    try {
        const Converted c = convert(log, "fuzz");
        CheckingSink sink(c.meta);
        write_records(log, c, sink);
    } catch (const std::runtime_error&) {  // a layer name longer than the trace keeps
    }
    return 0;
}
