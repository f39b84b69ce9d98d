// Where a migration's setup time went: vmm's own steps (connect, header, ram-setup), each with
// the transport's steps inside it where the transport reports them (Connection::setup_parts;
// a plugin's setup_parts op), in the order they ran.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace vmm::migration {

struct SetupPart {
    std::string name;
    double ms = 0;
    std::vector<SetupPart> parts;  // the transport's steps within this one
};

inline double total_ms(const std::vector<SetupPart>& parts) {
    double sum = 0;
    for (const auto& p : parts) sum += p.ms;
    return sum;
}

// Marks setup's steps one after another: each mark is the time since the last one (or since
// `from`), with the transport's own steps inside it.
class PartClock {
public:
    explicit PartClock(std::chrono::steady_clock::time_point from = std::chrono::steady_clock::now()) : last_(from) {}
    void mark(std::string name, std::vector<SetupPart> inner = {}) {
        auto now = std::chrono::steady_clock::now();
        parts.push_back({std::move(name), std::chrono::duration<double, std::milli>(now - last_).count(), std::move(inner)});
        last_ = now;
    }
    std::vector<SetupPart> parts;

private:
    std::chrono::steady_clock::time_point last_;
};

}  // namespace vmm::migration
