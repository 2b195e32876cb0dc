// Lanes: several independent training runs on one device at once. A small model leaves a
// GPU idle most of a step (kernel launches and host waits dominate), so a backend that
// can overlap runs gives each its own lane: an ordered queue of device work with its own
// scratch memory and read-back buffers. A thread that enters lane i issues every op of
// the backend there until it leaves. open_lanes orders the lanes after the work issued so
// far and close_lanes orders the work issued later after theirs, so the code around a
// step never sees the lanes. Each lane's ops run exactly as they would in order: only
// the interleaving of different lanes changes.
//
// A backend without lanes (the CPU's: its kernels use every core already) keeps the
// defaults and runs the runs one after another.
#pragma once

namespace fp8scope {

class RunLanes {
public:
    virtual ~RunLanes() = default;

    // The most lanes the backend runs at once; 1: none (the runs go one after another).
    virtual int max_lanes() const { return 1; }
    // From the thread that issues the ordinary work: lanes 0 .. n-1 (n <= max_lanes()),
    // ordered after everything issued so far.
    virtual void open_lanes(int /*n*/) {}
    // From the same thread once every lane's thread has left: what it issues next
    // follows the lanes' work.
    virtual void close_lanes() {}
    // From the thread that issues lane `lane`'s work, between open and close; one thread
    // per lane at a time.
    virtual void enter_lane(int /*lane*/) {}
    virtual void leave_lane() {}
};

}  // namespace fp8scope
