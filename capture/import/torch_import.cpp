// The capture folder through the engine's capture sink: one StatsCapture per run, fed as
// Fp8Linear feeds it (core/engine/fp8_linear.cpp).
#include "torch_import.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/capture_sink.h"
#include "engine/train_config.h"
#include "fp8/precision_plan.h"
#include "fp8/scaling.h"
#include "gemm_replay.h"
#include "train_recorder.h"

namespace fp8scope::import {

trace::TraceMeta torch_import_meta(const TorchCapture& c, const TorchImportOptions& o, const std::string& machine) {
    TrainConfig config;  // the runs as a lock-step comparison: make_trace_meta gives every id
    config.compare = {"baseline"};
    for (const std::string& r : o.replays) {
        if (quantizes_nothing(r)) throw std::invalid_argument("replay recipe '" + r + "' quantizes nothing: run 0 is the captured run");
        config.compare.push_back(training_recipe(r).name);  // throws naming an unknown recipe
    }
    config.capture_every = int(c.every);
    trace::TraceMeta m = trace::make_trace_meta(config, c.linears, o.tool_version, o.blockmap_every, o.quantizers);
    m.runs.front().name = c.name.substr(0, 64);
    for (std::size_t r = 1; r < m.runs.size(); ++r) m.runs[r].name = m.runs[r].recipe + " (replay)";
    m.created = c.created;
    m.rank = c.rank;
    m.world_size = c.world_size;
    m.machine = machine;
    nlohmann::json cfg = nlohmann::json::parse(c.manifest_json);
    for (const char* listed_elsewhere : {"steps", "tensors", "linears"}) cfg.erase(listed_elsewhere);
    m.config_json = nlohmann::json{{"import", cfg}, {"folder", c.dir}, {"replays", o.replays}}.dump();
    return m;
}

namespace {

// One captured tensor in backend memory, as a GEMM's operand.
struct OnDevice {
    DeviceBuffer<float> buffer;
    TensorDesc desc;
    bool present = false;
};

}  // namespace

struct TorchImporter::Impl {
    Impl(const TorchImportOptions& o, const trace::TraceMeta& meta, Backend& backend, trace::RecordSink& sink)
        : meta_(meta), backend_(backend), sink_(sink), ops_(meta.ops) {
        for (std::size_t r = 0; r < meta.runs.size(); ++r) {
            captures_.push_back(std::make_unique<trace::StatsCapture>(int(r), meta, sink, ops_, o.capture));
            plans_.emplace_back(training_recipe(meta.runs[r].recipe));
        }
        if (o.output_errors) replay_ = std::make_unique<GemmReplay>(backend);
    }

    void begin_step(std::int64_t step) {
        const bool maps = meta_.blockmap_every > 0 && (step - 1) % meta_.blockmap_every == 0;
        for (auto& cap : captures_) cap->begin_step(step, true, maps);
    }
    void end_step() {
        for (auto& cap : captures_) cap->end_step();
    }

    // x, w and dy of one linear at one step (any may be missing), in the engine's order.
    void linear(const TorchCapture& c, int linear, const std::array<const CapturedTensor*, 3>& tensors) {
        std::array<OnDevice, 3> v;
        std::map<std::string, std::vector<const CapturedTensor*>> by_file;
        for (const CapturedTensor* t : tensors)
            if (t) by_file[t->file].push_back(t);
        for (const auto& [file, list] : by_file) {
            std::vector<Tensor> loaded = load_captured(c, list);
            for (std::size_t i = 0; i < list.size(); ++i) upload(loaded[i], *list[i], v[std::size_t(list[i]->operand)]);
        }
        auto& x = v[std::size_t(Operand::X)];
        auto& w = v[std::size_t(Operand::W)];
        auto& dy = v[std::size_t(Operand::DY)];
        used_.clear();
        capture(linear, Gemm::Fprop, Operand::X, x, false);
        capture(linear, Gemm::Fprop, Operand::W, w, false);
        capture(linear, Gemm::Dgrad, Operand::DY, dy, false);
        capture(linear, Gemm::Dgrad, Operand::W, w, true);
        capture(linear, Gemm::Wgrad, Operand::DY, dy, true);
        capture(linear, Gemm::Wgrad, Operand::X, x, true);
        if (replay_ && x.present && w.present && dy.present)
            for (std::size_t r = 0; r < captures_.size(); ++r)
                replay_->run(*captures_[r], meta_.linears[std::size_t(linear)].layer, linear, plans_[r],
                             {x.desc, w.desc, dy.desc}, [&](Operand o, const Recipe& q) -> const DelayedState* {
                                 auto it = histories_.find({int(r), linear, int(o), recipe_name(q)});
                                 return it == histories_.end() ? nullptr : &it->second;
                             });
        // After the step's casts, delayed scaling's histories take the step's amax.
        for (const auto& [key, operand] : used_) histories_.at(key).push(backend_.scaling_amax(v[operand].desc));
    }

    using HistoryKey = std::tuple<int, int, int, std::string>;  // run, linear, operand, quantizer

    void upload(const Tensor& t, const CapturedTensor& ct, OnDevice& d) {
        d.buffer = DeviceBuffer<float>(backend_, t.data.size());
        backend_.copy_from_host(d.buffer.data(), t.data.data(), t.data.size() * sizeof(float));
        d.desc = TensorDesc::of(d.buffer.data(), ct.rows, ct.cols, backend_.device());
        d.present = true;
    }

    void capture(int linear, Gemm g, Operand o, const OnDevice& d, bool repeat) {
        if (!d.present) return;
        const TensorDesc values = repeat ? transposed_view(d.desc) : d.desc;
        for (std::size_t r = 0; r < captures_.size(); ++r) {
            const Recipe* q = plans_[r].quantizer(linear, g, o);
            const DelayedState* state = nullptr;
            if (q && std::holds_alternative<DelayedScaling>(*q)) {
                HistoryKey key{int(r), linear, int(o), recipe_name(*q)};
                state = &histories_.try_emplace(key, std::get<DelayedScaling>(*q)).first->second;
                used_.emplace(key, std::size_t(o));
            }
            captures_[r]->on_operand(OperandCapture{linear, g, o, values, &backend_, q, state, repeat});
        }
    }

    const trace::TraceMeta& meta_;
    Backend& backend_;
    trace::RecordSink& sink_;
    trace::OpNames ops_;
    std::vector<std::unique_ptr<trace::StatsCapture>> captures_;
    std::vector<PrecisionPlan> plans_;
    std::map<HistoryKey, DelayedState> histories_;
    std::map<HistoryKey, std::size_t> used_;  // this linear's histories, and their operand
    std::unique_ptr<GemmReplay> replay_;      // each GEMM's output error; null: not asked for
};

TorchImporter::TorchImporter(const trace::TraceMeta& meta, const TorchImportOptions& o, Backend& backend,
                             trace::RecordSink& sink)
    : impl_(std::make_unique<Impl>(o, meta, backend, sink)) {}

TorchImporter::~TorchImporter() = default;

std::int64_t TorchImporter::settled_step(const TorchCapture& c) {
    std::int64_t last = 0;
    for (const CapturedStep& s : c.steps) last = std::max(last, s.step);
    if (c.complete)
        for (const CapturedTensor& t : c.tensors) last = std::max(last, t.step);
    return last;
}

void TorchImporter::import_steps(const TorchCapture& c, std::int64_t last,
                                 const std::function<void(std::int64_t step)>& progress) {
    const trace::TraceMeta& meta = impl_->meta_;
    bool same = c.linears.size() == meta.linears.size();
    for (std::size_t i = 0; same && i < c.linears.size(); ++i)
        same = c.linears[i].name == meta.linears[i].name && c.linears[i].in_features == meta.linears[i].in_features &&
               c.linears[i].out_features == meta.linears[i].out_features;
    if (!same) throw CaptureError(c.manifest, "'linears' changed since the import began");
    // step -> linear -> x, w, dy
    std::map<std::int64_t, std::map<int, std::array<const CapturedTensor*, 3>>> captured;
    for (const CapturedTensor& t : c.tensors)
        if (t.step > last_ && t.step <= last) captured[t.step][t.linear][std::size_t(t.operand)] = &t;
    std::map<std::int64_t, const CapturedStep*> reported;  // a step reported twice: the later
    for (const CapturedStep& s : c.steps)
        if (s.step > last_ && s.step <= last) reported[s.step] = &s;
    std::set<std::int64_t> steps;
    for (const auto& [s, _] : captured) steps.insert(s);
    for (const auto& [s, _] : reported) steps.insert(s);

    const auto& recipes = meta.training_recipes;
    for (const std::int64_t step : steps) {
        if (auto it = captured.find(step); it != captured.end()) {
            impl_->begin_step(step);
            for (const auto& [linear, tensors] : it->second) impl_->linear(c, linear, tensors);
            impl_->end_step();
            if (progress) progress(step);
        }
        const auto rep = reported.find(step);
        for (std::size_t r = 0; r < meta.runs.size(); ++r) {
            trace::StepRecord s;
            s.run = std::int32_t(r);
            s.step = step;
            if (r == 0 && rep != reported.end()) {
                s.loss = rep->second->loss;
                s.step_ms = rep->second->step_ms;
            }
            auto id = std::find(recipes.begin(), recipes.end(), meta.runs[r].recipe);
            s.recipe = id == recipes.end() ? -1 : std::int32_t(id - recipes.begin());
            impl_->sink_.write(s);
        }
        last_ = step;
    }
    last_ = std::max(last_, last);
}

void import_torch_capture(const TorchCapture& c, const TorchImportOptions& o, const trace::TraceMeta& meta,
                          Backend& backend, trace::RecordSink& sink,
                          const std::function<void(std::int64_t step)>& progress) {
    TorchImporter importer(meta, o, backend, sink);
    std::int64_t last = TorchImporter::settled_step(c);
    for (const CapturedTensor& t : c.tensors) last = std::max(last, t.step);
    importer.import_steps(c, last, progress);
}

}  // namespace fp8scope::import
