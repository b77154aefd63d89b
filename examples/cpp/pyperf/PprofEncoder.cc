// PprofEncoder: see PprofEncoder.h. Builds the profile message from the
// dump's samples, serializes it and writes it gzip'd with zlib.
#include "PprofEncoder.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "FrameSpelling.h"
#include "file_id.h"
#include "profile.pb.h"
#include "utf8.h"

namespace ebpf::pyperf {
namespace {

namespace pb = perftools::profiles;

int64_t ClampToInt64(uint64_t value) {
  return value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(value);
}

int64_t SaturatingProduct(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<int64_t>::max();
  }
  return ClampToInt64(a * b);
}

// A function is known by its name, system name and file (string ids).
struct FunctionKey {
  int64_t name;
  int64_t system_name;
  int64_t filename;
  bool operator==(const FunctionKey& other) const {
    return name == other.name && system_name == other.system_name && filename == other.filename;
  }
};
struct FunctionKeyHash {
  size_t operator()(const FunctionKey& key) const {
    uint64_t h = static_cast<uint64_t>(key.name) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(key.system_name) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(key.filename) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

// A location is known by the frame's fields that tell locations apart (see
// LocationKey), kept in a SampleFrame.
struct LocationKeyHash {
  size_t operator()(const SampleFrame& key) const {
    uint64_t h = MixHash((uint64_t{key.name} << 8) ^ static_cast<uint64_t>(key.kind));
    h = MixHash(h ^ ((uint64_t{key.file} << 32) | static_cast<uint32_t>(key.line)));
    return static_cast<size_t>(MixHash(h ^ key.object ^ (key.address * 0x9E3779B97F4A7C15ull)));
  }
};

// The location of kNoFrames, which stands for a sample without frames: no
// frame's LocationKey has a line on a marker.
constexpr SampleFrame kNoFramesKey{FrameKind::kMarker, 0, 0, -1, 0, 0};

// Builds one dump's profile. Every string_view it keeps points into the
// dump's dictionary, into speller_ or at constants, which outlive the
// builder's use.
class ProfileBuilder {
 public:
  explicit ProfileBuilder(const DumpedProfile& dumped)
      : dumped_(dumped), dictionary_(*dumped.dictionary), speller_(dictionary_) {
    String("");  // index 0 is "", as the format requires
    AddValueType(profile_.add_sample_type(), "samples", "count");
    AddValueType(profile_.add_sample_type(), "cpu", "nanoseconds");
    AddValueType(profile_.mutable_period_type(), "cpu", "nanoseconds");
    profile_.set_period(ClampToInt64(dumped.sample_period_ns));
    auto since_epoch = [](std::chrono::system_clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    };
    const int64_t start = since_epoch(dumped.start);
    const int64_t end = since_epoch(dumped.end);
    profile_.set_time_nanos(start);
    profile_.set_duration_nanos(end > start ? end - start : 0);
    pid_key_ = String("pid");
    tid_key_ = String("tid");
    comm_key_ = String("comm");
  }

  void AddSample(const Sample& sample, uint64_t count) {
    pb::Sample* out = profile_.add_sample();
    AddValues(out, count);
    auto* ids = out->mutable_location_id();
    if (sample.frames.empty()) {
      ids->Add(Intern(&locations_, kNoFramesKey, profile_.mutable_location(),
                      [&](pb::Location* location) {
                        location->add_line()->set_function_id(Function(kNoFrames, "", ""));
                      }));
    } else {
      ids->Reserve(static_cast<int>(sample.frames.size()));
      // pprof wants the leaf first; a sample is root first.
      for (auto it = sample.frames.rbegin(); it != sample.frames.rend(); ++it) {
        ids->Add(Location(*it));
      }
    }
    CountMappingSamples(*ids, count);
    pb::Label* label = out->add_label();
    label->set_key(pid_key_);
    label->set_num(sample.pid);
    label = out->add_label();
    label->set_key(tid_key_);
    label->set_num(sample.tid);
    const std::string_view comm = speller_.Text(sample.comm);
    if (!comm.empty()) {
      label = out->add_label();
      label->set_key(comm_key_);
      label->set_str(String(comm));
    }
  }

  // Puts the mappings in order.
  pb::Profile& Finish() {
    OrderMappings();
    return profile_;
  }

 private:
  static void AddValueType(pb::ValueType* type, int64_t type_id, int64_t unit_id) {
    type->set_type(type_id);
    type->set_unit(unit_id);
  }
  void AddValueType(pb::ValueType* type, std::string_view name, std::string_view unit) {
    AddValueType(type, String(name), String(unit));
  }

  void AddValues(pb::Sample* sample, uint64_t count) {
    sample->add_value(ClampToInt64(count));
    sample->add_value(SaturatingProduct(count, dumped_.sample_period_ns));
  }

  // The id of the message `key` stands for in `ids`. The first time, appends
  // one to `messages` with the next id (pprof's ids count from 1, in the order
  // added) and has `fill` write the rest of it.
  template <typename Ids, typename Key, typename Message, typename Fill>
  static uint64_t Intern(Ids* ids, const Key& key,
                         google::protobuf::RepeatedPtrField<Message>* messages, Fill fill) {
    auto it = ids->find(key);
    if (it != ids->end()) return it->second;
    Message* message = messages->Add();
    const uint64_t id = static_cast<uint64_t>(messages->size());
    message->set_id(id);
    fill(message);
    ids->emplace(key, id);
    return id;
  }

  // The string table index of `text`, made strict UTF-8 if it is not.
  int64_t String(std::string_view text) {
    auto it = strings_.find(text);
    if (it != strings_.end()) return it->second;
    const int64_t id = profile_.string_table_size();
    if (IsPrintableUtf8(text) || text.empty()) {
      profile_.add_string_table(text.data(), text.size());
    } else {
      std::string sanitized;
      AppendSanitizedUtf8(text, &sanitized);
      profile_.add_string_table(std::move(sanitized));
    }
    strings_.emplace(text, id);
    return id;
  }

  // A function named `name`, with `system_name` ("" for none) unless the name
  // is empty: "<unknown>" is ours, not the system's (and pprof would simplify
  // it away).
  uint64_t Function(std::string_view name, std::string_view system_name,
                    std::string_view filename) {
    const bool unnamed = name.empty();
    const FunctionKey key{String(unnamed ? kPprofUnnamedFrame : name),
                          unnamed ? 0 : String(system_name), String(filename)};
    return Intern(&functions_, key, profile_.mutable_function(), [&](pb::Function* function) {
      function->set_name(key.name);
      function->set_system_name(key.system_name);
      function->set_filename(key.filename);
    });
  }

  uint64_t Mapping(std::string_view path, std::string_view build_id) {
    const std::pair<int64_t, int64_t> key{String(path), String(build_id)};
    return Intern(&mappings_, key, profile_.mutable_mapping(), [&](pb::Mapping* mapping) {
      mapping->set_filename(key.first);
      mapping->set_build_id(key.second);
      mapping->set_has_functions(true);
    });
  }

  // Samples under each mapping (a sample counts once per mapping it touches).
  void CountMappingSamples(const google::protobuf::RepeatedField<uint64_t>& location_ids,
                           uint64_t count) {
    seen_mappings_.clear();
    for (uint64_t id : location_ids) {
      const uint64_t mapping = profile_.location(static_cast<int>(id - 1)).mapping_id();
      if (mapping == 0 ||
          std::find(seen_mappings_.begin(), seen_mappings_.end(), mapping) != seen_mappings_.end())
        continue;
      seen_mappings_.push_back(mapping);
      if (mapping_samples_.size() < mapping) mapping_samples_.resize(mapping);
      mapping_samples_[mapping - 1] += count;
    }
  }

  // pprof takes the first mapping for the main binary (its "File:" line):
  // mappings go by samples, most first, so that is the interpreter (whose
  // eval loop is under every Python stack), and the kernel's go last.
  void OrderMappings() {
    const int n = profile_.mapping_size();
    if (n < 2) return;
    mapping_samples_.resize(static_cast<size_t>(n));
    std::vector<uint64_t> order(static_cast<size_t>(n));  // old ids, in their new order
    for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = static_cast<uint64_t>(i) + 1;
    auto is_kernel = [&](uint64_t id) { return id == kernel_mapping_; };
    std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
      if (is_kernel(a) != is_kernel(b)) return is_kernel(b);
      return mapping_samples_[a - 1] > mapping_samples_[b - 1];
    });
    std::vector<uint64_t> new_id(static_cast<size_t>(n) + 1);
    for (size_t i = 0; i < order.size(); ++i) new_id[order[i]] = i + 1;
    google::protobuf::RepeatedPtrField<pb::Mapping> reordered;
    for (uint64_t old : order) {
      pb::Mapping* m = reordered.Add();
      m->Swap(profile_.mutable_mapping(static_cast<int>(old - 1)));
      m->set_id(new_id[old]);
    }
    profile_.mutable_mapping()->Swap(&reordered);
    for (pb::Location& location : *profile_.mutable_location()) {
      if (location.mapping_id() != 0) location.set_mapping_id(new_id[location.mapping_id()]);
    }
  }

  // The mapped file of a native frame, if it has one with a path (else null).
  const FrameDictionary::Object* MappedFile(const SampleFrame& frame) const {
    if (frame.kind != FrameKind::kNative || frame.object == 0) return nullptr;
    const FrameDictionary::Object& object = dictionary_.object(frame.object);
    return object.path == 0 ? nullptr : &object;
  }

  // What tells `frame`'s location from others': a Python frame's name, file
  // and line; a native frame's symbol, and its file and address if it has a
  // file; any other frame's kind and text.
  SampleFrame LocationKey(const SampleFrame& frame) const {
    SampleFrame key;
    key.kind = frame.kind;
    key.name = frame.name;
    if (frame.kind == FrameKind::kPython) {
      key.file = frame.file;
      key.line = frame.line;
    } else if (frame.kind == FrameKind::kTask) {
      key.file = frame.file;  // its coroutine
    } else if (MappedFile(frame) != nullptr) {
      key.object = frame.object;
      key.address = frame.address;
    }
    return key;
  }

  uint64_t Location(const SampleFrame& frame) {
    return Intern(&locations_, LocationKey(frame), profile_.mutable_location(),
                  [&](pb::Location* location) { FillLocation(frame, location); });
  }

  // A new location's line (its function, and a Python frame's line number)
  // and, for a native frame in a known file or a kernel frame, its mapping.
  void FillLocation(const SampleFrame& frame, pb::Location* location) {
    pb::Line* line = location->add_line();
    const std::string_view name = speller_.FullName(frame);
    switch (frame.kind) {
      case FrameKind::kPython:
        line->set_function_id(Function(speller_.DisplayName(frame), speller_.FullName(frame),
                                       speller_.Text(frame.file)));
        line->set_line(frame.line);
        break;
      case FrameKind::kNative:
        line->set_function_id(Function(name, name, ""));
        if (const FrameDictionary::Object* object = MappedFile(frame)) {
          location->set_mapping_id(
              Mapping(dictionary_.String(object->path), dictionary_.String(object->build_id)));
          location->set_address(frame.address);
        }
        break;
      case FrameKind::kKernel:
        line->set_function_id(Function(name, name, ""));
        kernel_mapping_ = Mapping(kPprofKernelMapping, "");
        location->set_mapping_id(kernel_mapping_);
        break;
      case FrameKind::kMarker:
        line->set_function_id(Function(name, "", ""));
        break;
      case FrameKind::kTask:
        // "request-7 (handle)", in the file CPython's own sampler names tasks by.
        line->set_function_id(Function(name, name, kPprofTaskFile));
        break;
    }
  }

  const DumpedProfile& dumped_;
  const FrameDictionary& dictionary_;
  StackSpeller speller_;
  pb::Profile profile_;
  std::unordered_map<std::string_view, int64_t> strings_;
  std::unordered_map<FunctionKey, uint64_t, FunctionKeyHash> functions_;
  struct PairHash {
    size_t operator()(const std::pair<int64_t, int64_t>& p) const {
      return static_cast<size_t>(static_cast<uint64_t>(p.first) * 0x9E3779B97F4A7C15ull ^
                                 static_cast<uint64_t>(p.second));
    }
  };
  std::unordered_map<std::pair<int64_t, int64_t>, uint64_t, PairHash> mappings_;
  std::unordered_map<SampleFrame, uint64_t, LocationKeyHash> locations_;  // LocationKey -> id
  int64_t pid_key_ = 0, tid_key_ = 0, comm_key_ = 0;
  uint64_t kernel_mapping_ = 0;            // its id, 0 if none
  std::vector<uint64_t> mapping_samples_;  // by mapping id - 1
  std::vector<uint64_t> seen_mappings_;    // scratch: one sample's mappings
};

// Writes `data` gzip'd (zlib's gzip wrapper) to `out`.
bool WriteGzip(const std::string& data, std::FILE* out) {
  z_stream stream;
  std::memset(&stream, 0, sizeof(stream));
  // Fastest level: the dump is written from the sampling thread; windowBits
  // 15 + 16 asks for the gzip header and trailer.
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    errno = ENOMEM;
    return false;
  }
  std::vector<unsigned char> buffer(64 * 1024);
  size_t offset = 0;
  bool ok = true;
  int status = Z_OK;
  while (ok && status != Z_STREAM_END) {
    // avail_in is 32 bits: feed at most 1 GiB at a time.
    const size_t chunk = std::min<size_t>(data.size() - offset, size_t{1} << 30);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + offset));
    stream.avail_in = static_cast<uInt>(chunk);
    const bool last = offset + chunk == data.size();
    do {
      stream.next_out = buffer.data();
      stream.avail_out = static_cast<uInt>(buffer.size());
      status = deflate(&stream, last ? Z_FINISH : Z_NO_FLUSH);
      if (status == Z_STREAM_ERROR) {
        errno = EIO;
        ok = false;
        break;
      }
      const size_t produced = buffer.size() - stream.avail_out;
      if (produced != 0 && std::fwrite(buffer.data(), 1, produced, out) != produced) {
        ok = false;  // errno set by the write
        break;
      }
    } while (stream.avail_out == 0);
    offset += chunk - stream.avail_in;
  }
  deflateEnd(&stream);
  return ok;
}

class PprofEncoder final : public ProfileEncoder {
 public:
  ProfileFormat format() const override { return ProfileFormat::kPprof; }
  bool Write(const DumpedProfile& dumped, std::FILE* out) override {
    try {
      std::string serialized;
      {
        ProfileBuilder builder(dumped);
        for (const StackCount& stack : dumped.stacks) builder.AddSample(*stack.sample, stack.count);
        if (!builder.Finish().SerializeToString(&serialized)) {
          errno = EFBIG;  // over protobuf's 2 GiB limit
          return false;
        }
      }  // the message is freed before the file is compressed
      return WriteGzip(serialized, out);
    } catch (const std::bad_alloc&) {
      errno = ENOMEM;
      return false;
    }
  }
};

}  // namespace

std::unique_ptr<ProfileEncoder> MakePprofEncoder() { return std::make_unique<PprofEncoder>(); }

}  // namespace ebpf::pyperf
