// Every procedure of libvirt's remote program that vmmd serves or sends, by libvirt's own name
// (REMOTE_PROC_<NAME> in src/remote/remote_protocol.x) and number: the one table the daemon's
// handlers and events name them from. procedure_names.cc holds libvirt's whole list, to name a
// call vmmd refuses; tests/vmmd/rpc/procedures_test.cc checks this table against it.
#pragma once

#include <cstdint>

// X(NAME, NUMBER), in the order of their numbers.
#define VMMD_REMOTE_PROCEDURES(X) \
    X(CONNECT_OPEN, 1) \
    X(CONNECT_CLOSE, 2) \
    X(CONNECT_GET_TYPE, 3) \
    X(CONNECT_GET_VERSION, 4) \
    X(NODE_GET_INFO, 6) \
    X(CONNECT_GET_CAPABILITIES, 7) \
    X(DOMAIN_CREATE, 9) \
    X(DOMAIN_CREATE_XML, 10) \
    X(DOMAIN_DEFINE_XML, 11) \
    X(DOMAIN_DESTROY, 12) \
    X(DOMAIN_GET_XML_DESC, 14) \
    X(DOMAIN_GET_AUTOSTART, 15) \
    X(DOMAIN_GET_INFO, 16) \
    X(DOMAIN_GET_OS_TYPE, 19) \
    X(CONNECT_LIST_DEFINED_DOMAINS, 21) \
    X(DOMAIN_LOOKUP_BY_ID, 22) \
    X(DOMAIN_LOOKUP_BY_NAME, 23) \
    X(DOMAIN_LOOKUP_BY_UUID, 24) \
    X(CONNECT_NUM_OF_DEFINED_DOMAINS, 25) \
    X(DOMAIN_RESUME, 28) \
    X(DOMAIN_SHUTDOWN, 33) \
    X(DOMAIN_SUSPEND, 34) \
    X(DOMAIN_UNDEFINE, 35) \
    X(CONNECT_LIST_DOMAINS, 37) \
    X(CONNECT_NUM_OF_DOMAINS, 51) \
    X(DOMAIN_RESTORE, 54) \
    X(DOMAIN_SAVE, 55) \
    X(CONNECT_GET_HOSTNAME, 59) \
    X(CONNECT_SUPPORTS_FEATURE, 60) \
    X(AUTH_LIST, 66) \
    X(CONNECT_GET_URI, 110) \
    X(CONNECT_IS_SECURE, 149) \
    X(DOMAIN_IS_ACTIVE, 150) \
    X(DOMAIN_IS_PERSISTENT, 151) \
    X(CONNECT_GET_LIB_VERSION, 157) \
    X(DOMAIN_GET_JOB_INFO, 163) \
    X(DOMAIN_ABORT_JOB, 164) \
    X(DOMAIN_MIGRATE_SET_MAX_DOWNTIME, 166) \
    X(DOMAIN_MANAGED_SAVE, 182) \
    X(DOMAIN_HAS_MANAGED_SAVE_IMAGE, 183) \
    X(DOMAIN_MANAGED_SAVE_REMOVE, 184) \
    X(DOMAIN_CREATE_WITH_FLAGS, 196) \
    X(DOMAIN_MIGRATE_SET_MAX_SPEED, 207) \
    X(DOMAIN_GET_STATE, 212) \
    X(DOMAIN_UNDEFINE_FLAGS, 231) \
    X(DOMAIN_SAVE_FLAGS, 232) \
    X(DOMAIN_RESTORE_FLAGS, 233) \
    X(DOMAIN_DESTROY_FLAGS, 234) \
    X(DOMAIN_SAVE_IMAGE_GET_XML_DESC, 235) \
    X(DOMAIN_MIGRATE_GET_MAX_SPEED, 242) \
    X(DOMAIN_SHUTDOWN_FLAGS, 258) \
    X(CONNECT_LIST_ALL_DOMAINS, 273) \
    X(DOMAIN_GET_JOB_STATS, 298) \
    X(DOMAIN_MIGRATE_BEGIN3_PARAMS, 302) \
    X(DOMAIN_MIGRATE_PREPARE3_PARAMS, 303) \
    X(DOMAIN_MIGRATE_PERFORM3_PARAMS, 305) \
    X(DOMAIN_MIGRATE_FINISH3_PARAMS, 306) \
    X(DOMAIN_MIGRATE_CONFIRM3_PARAMS, 307) \
    X(CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, 316) \
    X(CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY, 317) \
    X(DOMAIN_EVENT_CALLBACK_LIFECYCLE, 318) \
    X(DOMAIN_EVENT_CALLBACK_MIGRATION_ITERATION, 359) \
    X(DOMAIN_EVENT_CALLBACK_JOB_COMPLETED, 363) \
    X(DOMAIN_MIGRATE_START_POST_COPY, 364) \
    X(DOMAIN_MIGRATE_GET_MAX_DOWNTIME, 387) \
    X(DOMAIN_ABORT_JOB_FLAGS, 442)

namespace vmmd::rpc {

enum class Proc : int32_t {
#define VMMD_PROC_ENUMERATOR(name, number) name = number,
    VMMD_REMOTE_PROCEDURES(VMMD_PROC_ENUMERATOR)
#undef VMMD_PROC_ENUMERATOR
};

// libvirt's name for `p`, without REMOTE_PROC_ (as a NO_SUPPORT error and a log say it).
constexpr const char* name_of(Proc p) {
    switch (p) {
#define VMMD_PROC_NAME(name, number) \
    case Proc::name: return #name;
        VMMD_REMOTE_PROCEDURES(VMMD_PROC_NAME)
#undef VMMD_PROC_NAME
    }
    return "";
}

constexpr int32_t number_of(Proc p) { return static_cast<int32_t>(p); }

}  // namespace vmmd::rpc
