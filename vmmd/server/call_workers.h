// CallWorkers: the calls of one client connection run on threads of their own, at most `limit`
// at once (libvirtd's max_client_requests is 5), so that a long call (a migration's Perform3,
// Finish3 waiting for the incoming vmm, a destroy's grace period) never stops the connection's
// reader: keepalive pings are answered meanwhile (libvirt's client drops a connection whose
// pings go unanswered for ~30 s), and the same client's other calls run (virsh migrate
// --timeout suspends the domain on the connection its Perform3 holds). Every thread is joined.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace vmmd {

class CallWorkers {
public:
    explicit CallWorkers(size_t limit) : limit_(limit) {}
    ~CallWorkers() { wait_all(); }
    CallWorkers(const CallWorkers&) = delete;
    CallWorkers& operator=(const CallWorkers&) = delete;

    // Runs `call` on a new thread, first waiting while `limit` calls run (the reader then reads
    // no more from that client, as libvirtd does). `call` must not throw.
    void run(std::function<void()> call);
    // Returns once every call has returned (before CONNECT_CLOSE is answered, and at the end).
    void wait_all();

private:
    struct Worker {
        std::thread thread;
        bool done = false;
    };
    void reap_locked();  // joins the threads whose call returned

    size_t limit_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::list<Worker> workers_;  // running, or done and not joined yet
};

}  // namespace vmmd
