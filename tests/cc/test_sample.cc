// Tests of Sample.h: FrameDictionary's interning of strings and mapped files,
// its Clear, and SampleHash, which ProfileOutput counts equal samples by.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "Sample.h"

namespace ebpf::pyperf {
namespace {

TEST(FrameDictionary, EqualStringsGetOneIdAndTheEmptyStringIsZero) {
  FrameDictionary dictionary;
  EXPECT_EQ(dictionary.Intern(""), 0u);
  EXPECT_EQ(dictionary.String(0), "");
  const StringId a = dictionary.Intern("memcpy");
  const StringId b = dictionary.Intern("/srv/app.py");
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  // Interned from another buffer: still the same id, and nothing new kept.
  const size_t strings = dictionary.strings();
  EXPECT_EQ(dictionary.Intern(std::string("mem") + "cpy"), a);
  EXPECT_EQ(dictionary.strings(), strings);
  EXPECT_EQ(dictionary.String(a), "memcpy");
  EXPECT_EQ(dictionary.String(b), "/srv/app.py");
}

// A string_view from String() stays valid while more strings are interned.
TEST(FrameDictionary, InternedStringsStayWhereTheyAre) {
  FrameDictionary dictionary;
  const std::string_view first = dictionary.String(dictionary.Intern("first"));
  for (int i = 0; i < 10000; ++i) dictionary.Intern("s" + std::to_string(i));
  EXPECT_EQ(first, "first");
  EXPECT_EQ(first.data(), dictionary.String(dictionary.Intern("first")).data());
}

TEST(FrameDictionary, ObjectsAreKeyedByFileIdentity) {
  FrameDictionary dictionary;
  const FileId libc{0x801, 1234};
  const FileId app{0x801, 5678};
  EXPECT_EQ(dictionary.FindObject(libc), 0u);
  const ObjectId id = dictionary.AddObject(libc, "/lib/libc.so.6", "abc123");
  EXPECT_NE(id, 0u);
  EXPECT_EQ(dictionary.FindObject(libc), id);
  // The same file under another path (another process's mount namespace) is
  // the same object, as first added.
  EXPECT_EQ(dictionary.AddObject(libc, "/proc/7/root/lib/libc.so.6", ""), id);
  EXPECT_EQ(dictionary.String(dictionary.object(id).path), "/lib/libc.so.6");
  EXPECT_EQ(dictionary.String(dictionary.object(id).build_id), "abc123");
  EXPECT_TRUE(dictionary.object(id).file == libc);
  const ObjectId other = dictionary.AddObject(app, "/srv/app", "");
  EXPECT_NE(other, id);
  EXPECT_EQ(dictionary.object(other).build_id, 0u);  // no build-id: ""
  EXPECT_EQ(dictionary.objects(), 3u);               // 0 (unknown) and the two
}

TEST(FrameDictionary, ClearForgetsEverythingAndChangesTheGeneration) {
  FrameDictionary dictionary;
  const uint64_t generation = dictionary.generation();
  dictionary.Intern("memcpy");
  dictionary.AddObject(FileId{0x801, 1234}, "/lib/libc.so.6", "");
  dictionary.Clear();
  EXPECT_NE(dictionary.generation(), generation);
  EXPECT_EQ(dictionary.strings(), 1u);  // the empty string only
  EXPECT_EQ(dictionary.objects(), 1u);  // "unknown" only
  EXPECT_EQ(dictionary.FindObject(FileId{0x801, 1234}), 0u);
  EXPECT_EQ(dictionary.Intern(""), 0u);
  // Ids are handed out afresh.
  EXPECT_EQ(dictionary.Intern("other"), 1u);
  // No two dictionaries share a generation, so an id kept for one is never
  // taken for another's.
  FrameDictionary another;
  EXPECT_NE(another.generation(), dictionary.generation());
  EXPECT_NE(another.generation(), generation);
}

Sample SomeSample(FrameDictionary* dictionary) {
  Sample sample;
  sample.pid = 10;
  sample.tid = 11;
  sample.comm = dictionary->Intern("python3");
  SampleFrame python;
  python.kind = FrameKind::kPython;
  python.name = dictionary->Intern("Handler.run");
  python.file = dictionary->Intern("/srv/app.py");
  python.line = 12;
  SampleFrame native;
  native.kind = FrameKind::kNative;
  native.name = dictionary->Intern("memcpy");
  native.object = dictionary->AddObject(FileId{0x801, 1234}, "/lib/libc.so.6", "");
  native.address = 0x1234;
  sample.frames = {python, native};
  return sample;
}

TEST(SampleHash, EqualSamplesHashAlikeAndAnyFieldTellsThemApart) {
  FrameDictionary dictionary;
  const Sample sample = SomeSample(&dictionary);
  const Sample same = SomeSample(&dictionary);
  ASSERT_TRUE(sample == same);
  EXPECT_EQ(SampleHash()(sample), SampleHash()(same));

  // Each a change of one field: unequal, and (for these) hashed apart.
  std::vector<Sample> others(7, sample);
  others[0].tid = 12;
  others[1].frames[0].line = 13;
  others[2].frames[1].address = 0x1238;
  others[3].frames[1].object = 0;
  others[4].frames.pop_back();
  others[5].frames[0].kind = FrameKind::kMarker;
  others[6].comm = dictionary.Intern("python");
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_FALSE(others[i] == sample) << i;
    EXPECT_NE(SampleHash()(others[i]), SampleHash()(sample)) << i;
  }
}

}  // namespace
}  // namespace ebpf::pyperf
