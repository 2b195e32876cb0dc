// libFuzzer harness of the rendezvous hello as rank 0 reads it: any bytes either join a
// rank or are refused with a reason, and what joins is exactly the hello a rank of the
// job writes for that rank, with a proof under the job's secret.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "comm/job_secret.h"
#include "comm/rendezvous.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // The seeds' secret and greeting nonce: a seed can then hold a hello that joins.
    static const std::string secret = "fuzz job secret!", nonce0(fp8scope::kNonceBytes, 'N');
    const std::string hello(reinterpret_cast<const char*>(data), size);
    const fp8scope::JoiningHello h = fp8scope::check_hello(hello, 4, secret, nonce0);
    if ((h.rank < 0) == h.error.empty()) std::abort();  // a rank or a reason, never both
    if (h.rank < 0) return 0;
    if (h.rank < 1 || h.rank > 3) std::abort();
    const std::string proof = fp8scope::hello_proof(secret, true, nonce0, h.nonce, 4, h.rank);
    const std::string words = "fp8scope-rendezvous " + std::to_string(fp8scope::kRendezvousVersion) + " 4 ";
    if (hello != words + std::to_string(h.rank) + " " + fp8scope::to_hex(h.nonce) + " " +
                     fp8scope::to_hex(proof))
        std::abort();
    if (h.key != fp8scope::link_key(secret, nonce0, h.nonce, 4, h.rank)) std::abort();
    return 0;
}
