// Postcopy over the byte stream (postcopy_link.h): pages as PAGES / PAGES_SUMMED / ZERO
// records and an END, requests (PAGE_REQUEST) and POSTCOPY_DONE on the stream's reverse
// direction. With postcopy-preempt the answers to requests go on a second connection in the
// same records, with an END of their own that goes first, so that they never wait behind the
// background push queued on the main connection.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "vmm/migration/transport/postcopy_link.h"
#include "vmm/stream/byte_stream.h"

namespace vmm::migration {

// `preempt`: postcopy-preempt's connection, or null. Both streams outlive the link.
std::unique_ptr<SourcePostcopyLink> stream_postcopy_source(stream::ByteStream& main, stream::ByteStream* preempt, PostcopyLinkConfig config);

// `cut` breaks the preempt connection from another thread (the receiver ends early).
std::unique_ptr<DestPostcopyLink> stream_postcopy_dest(stream::ByteStream& main, stream::ByteStream* preempt, std::function<void()> cut,
                                                       PostcopyLinkConfig config);

}  // namespace vmm::migration
