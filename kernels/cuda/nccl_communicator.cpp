#include "cuda/nccl_communicator.h"

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <string>

#include "cuda/nccl_max_keys.h"
#include "cuda/runtime/check.h"

namespace fp8scope {

NcclCommunicator::NcclCommunicator(CudaBackend& backend, Rendezvous& rendezvous)
    : backend_(backend), rank_(rendezvous.rank()), world_(rendezvous.world_size()) {
    FP8SCOPE_CUDA_CHECK(cudaSetDevice(backend.device_index()));
    ncclUniqueId id{};
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string blob = rendezvous.broadcast(std::string_view(id.internal, sizeof id.internal));
    if (blob.size() != sizeof id.internal)
        throw std::runtime_error("nccl: rank 0 sent a unique id of " + std::to_string(blob.size()) + " bytes");
    std::copy(blob.begin(), blob.end(), id.internal);
    check(ncclCommInitRank(&comm_, world_, id, rank_), "ncclCommInitRank");
    // Reductions first when the scheduler has a choice: they are on the critical path.
    int least = 0, greatest = 0;
    FP8SCOPE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    FP8SCOPE_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    FP8SCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming));
    FP8SCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

NcclCommunicator::~NcclCommunicator() {
    // Abort, not destroy: destroying finalizes with the peers, which hangs when one of them
    // died; every reduction that mattered was waited for already.
    if (comm_ && !aborted_) ncclCommAbort(comm_);
    if (done_) cudaEventDestroy(done_);
    if (issued_) cudaEventDestroy(issued_);
    if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::check(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return;
    throw std::runtime_error(std::string("nccl: ") + what + " failed on rank " + std::to_string(rank_) + ": " +
                             ncclGetErrorString(r) + (aborted_ ? " (the communicator was aborted)" : ""));
}

std::string NcclCommunicator::describe() const {
    int v = 0;
    ncclGetVersion(&v);
    return "nccl " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
           ", " + std::to_string(world_) + " ranks";
}

void NcclCommunicator::after_backend(const char* what) {
    if (aborted_)
        throw std::runtime_error(std::string("nccl: ") + what + " on an aborted communicator (rank " +
                                 std::to_string(rank_) + ")");
    FP8SCOPE_CUDA_CHECK(cudaEventRecord(issued_, backend_.stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamWaitEvent(stream_, issued_, 0));
}

void NcclCommunicator::all_reduce(void* data, DType dtype, std::int64_t n, ReduceOp op) {
    after_backend("all_reduce");
    if (n == 0) return;
    if (dtype != DType::F32 && dtype != DType::BF16)
        throw std::logic_error(std::string("nccl all_reduce: ") + dtype_name(dtype) + " is not summed here");
    if (op == ReduceOp::Max) {
        // ncclMax on floats may drop a NaN (fmaxf): the max of ordered int32 keys keeps it.
        if (dtype != DType::F32)
            throw std::logic_error("nccl all_reduce: the max is taken of float32 values only, not bf16");
        float* values = static_cast<float*>(data);
        cuda::floats_to_max_keys(values, n, stream_);
        check(ncclAllReduce(data, data, std::size_t(n), ncclInt32, ncclMax, comm_, stream_), "ncclAllReduce");
        cuda::max_keys_to_floats(values, n, stream_);
        return;
    }
    const ncclRedOp_t red = op == ReduceOp::Sum ? ncclSum : ncclAvg;
    const ncclDataType_t type = dtype == DType::F32 ? ncclFloat32 : ncclBfloat16;
    check(ncclAllReduce(data, data, std::size_t(n), type, red, comm_, stream_), "ncclAllReduce");
}

void NcclCommunicator::all_to_all(const void* send, void* recv, std::int64_t bytes) {
    after_backend("all_to_all");
    if (bytes == 0) return;
    const std::size_t part = std::size_t(bytes);
    check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < world_; ++r) {
        check(ncclSend(static_cast<const char*>(send) + std::size_t(r) * part, part, ncclUint8, r, comm_, stream_),
              "ncclSend");
        check(ncclRecv(static_cast<char*>(recv) + std::size_t(r) * part, part, ncclUint8, r, comm_, stream_),
              "ncclRecv");
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
}

void NcclCommunicator::all_gather(const void* send, void* recv, std::int64_t bytes) {
    after_backend("all_gather");
    if (bytes == 0) return;
    check(ncclAllGather(send, recv, std::size_t(bytes), ncclUint8, comm_, stream_), "ncclAllGather");
}

void NcclCommunicator::in_order(const std::function<void()>& work) {
    after_backend("in_order");
    // The backend issues onto this stream until `work` returns (or throws).
    struct Restore {
        CudaBackend& backend;
        cudaStream_t stream;
        ~Restore() { backend.set_stream(stream); }
    } restore{backend_, backend_.set_stream(stream_)};
    work();
}

void NcclCommunicator::join() {
    FP8SCOPE_CUDA_CHECK(cudaEventRecord(done_, stream_));
    FP8SCOPE_CUDA_CHECK(cudaStreamWaitEvent(backend_.stream(), done_, 0));
}

void NcclCommunicator::synchronize() {
    // Polls rather than blocks, so an abort from the watchdog's thread ends the wait.
    while (cudaStreamQuery(stream_) == cudaErrorNotReady) {
        if (aborted_) throw std::runtime_error("nccl: rank " + std::to_string(rank_) + " aborted a reduction in flight");
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
            check(async, "a reduction in flight");
        std::this_thread::yield();
    }
    FP8SCOPE_CUDA_CHECK(cudaGetLastError());
}

void NcclCommunicator::abort() {
    if (aborted_.exchange(true)) return;
    ncclCommAbort(comm_);
}

}  // namespace fp8scope
