// Stop strings over streamed pieces: held-back prefixes, the earliest match, and the rest.
#include <gtest/gtest.h>

#include "engine/stop_strings.h"

namespace fornace {
namespace {

// Feeds `pieces` and returns what was released, joined, and whether a stop string ended it.
std::pair<std::string, bool> stream(StopStrings& stops, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& piece : pieces) out += stops.push(piece);
  bool stopped = stops.stopped();
  if (!stopped) out += stops.flush();
  return {out, stopped};
}

TEST(StopStrings, CutsTheTextBeforeAStopStringSplitAcrossPieces) {
  StopStrings stops({"</end>"});
  EXPECT_EQ(stops.push("hello </"), "hello ");  // "</" may start the stop string: held.
  EXPECT_EQ(stops.push("en"), "");
  EXPECT_EQ(stops.push("d> after"), "");
  EXPECT_TRUE(stops.stopped());
  EXPECT_EQ(stops.push("more"), "");
}

TEST(StopStrings, ReleasesAHeldPrefixThatDoesNotBecomeAStopString) {
  StopStrings stops({"</end>"});
  EXPECT_EQ(stops.push("a </e"), "a ");
  EXPECT_EQ(stops.push("x"), "</ex");
  EXPECT_FALSE(stops.stopped());
  EXPECT_EQ(stops.push("</"), "");
  EXPECT_EQ(stops.flush(), "</");  // The end of the text: what was held is text.
}

TEST(StopStrings, TheEarliestOfSeveralStopStringsWins) {
  StopStrings stops({"world", "lo w", ""});
  auto [text, stopped] = stream(stops, {"hel", "lo wor", "ld"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "hel");
}

TEST(StopStrings, WithoutStopStringsEverythingPassesAtOnce) {
  StopStrings stops({});
  EXPECT_EQ(stops.push("abc"), "abc");
  EXPECT_EQ(stops.flush(), "");
  // A stop string at the very start leaves no text.
  StopStrings at_start({"ab"});
  auto [text, stopped] = stream(at_start, {"a", "bc"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "");
}

}  // namespace
}  // namespace fornace
