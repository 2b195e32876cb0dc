#include "util/background_thread.h"

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace fp8scope {

void lower_thread_priority() {
#if defined(__linux__)
    constexpr int kNice = 10;  // still ahead of idle work; behind the training thread
    const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
    const int now = ::getpriority(PRIO_PROCESS, tid);
    if (now < kNice) (void)::setpriority(PRIO_PROCESS, tid, kNice);
#endif
}

}  // namespace fp8scope
