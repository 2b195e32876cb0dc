#include "comm/job_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace fp8scope {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string place(std::string_view nonce0, std::string_view nonce_rank, int world_size, int rank) {
    return std::string(nonce0) + std::string(nonce_rank) + " " + std::to_string(world_size) + " " +
           std::to_string(rank);
}

}  // namespace

std::string from_hex(std::string_view hex) {
    if (hex.size() % 2) return {};
    std::string out(hex.size() / 2, '\0');
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return {};
        out[i] = static_cast<char>(hi * 16 + lo);
    }
    return out;
}

std::string to_hex(std::string_view bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : bytes) out += {kDigits[b >> 4], kDigits[b & 15]};
    return out;
}

std::string parse_job_secret(std::string_view hex) {
    const std::string bytes = from_hex(hex);
    if (hex.size() < 32 || bytes.empty())
        throw std::invalid_argument(std::string(kJobSecretVar) + ": expected at least 32 hex digits (128 bits), an even "
                                    "count, the same on every rank of the job; got " +
                                    std::to_string(hex.size()) + " characters");
    return bytes;
}

std::string random_bytes(std::size_t n) {
    std::ifstream in("/dev/urandom", std::ios::binary);
    std::string out(n, '\0');
    if (!in.read(out.data(), std::streamsize(n))) throw std::runtime_error("cannot read /dev/urandom");
    return out;
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
    unsigned char mac[kMacBytes];
    unsigned int len = 0;
    ::HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
           mac, &len);
    return std::string(reinterpret_cast<const char*>(mac), kMacBytes);
}

bool same_mac(std::string_view a, std::string_view b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string hello_proof(std::string_view secret, bool rank_side, std::string_view nonce0, std::string_view nonce_rank,
                        int world_size, int rank) {
    return hmac_sha256(secret, std::string(rank_side ? "fp8scope hello rank " : "fp8scope hello hub ") +
                                   place(nonce0, nonce_rank, world_size, rank));
}

std::string link_key(std::string_view secret, std::string_view nonce0, std::string_view nonce_rank, int world_size,
                     int rank) {
    return hmac_sha256(secret, "fp8scope frames " + place(nonce0, nonce_rank, world_size, rank));
}

std::string frame_mac(std::string_view key, char direction, std::uint64_t seq, std::string_view frame) {
    unsigned char iv[12] = {static_cast<unsigned char>(direction)};
    for (int i = 0; i < 8; ++i) iv[1 + i] = static_cast<unsigned char>((seq >> (8 * i)) & 0xFF);
    const std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
    unsigned char tag[kFrameMacBytes];
    int len = 0;
    bool ok = key.size() == 32 && ctx &&
              EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                                 reinterpret_cast<const unsigned char*>(key.data()), iv) == 1;
    constexpr std::size_t kChunk = std::size_t(1) << 30;  // the update takes an int
    for (std::size_t at = 0; ok && at < frame.size(); at += kChunk)
        ok = EVP_EncryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(frame.data()) + at,
                               int(std::min(kChunk, frame.size() - at))) == 1;
    if (!ok || EVP_EncryptFinal_ex(ctx.get(), tag, &len) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, int(kFrameMacBytes), tag) != 1)
        throw std::runtime_error("AES-GMAC of a rendezvous frame failed");
    return std::string(reinterpret_cast<const char*>(tag), kFrameMacBytes);
}

}  // namespace fp8scope
