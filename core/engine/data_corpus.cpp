// The grammar behind builtin_corpus(). Words are drawn with Zipf-like weights (earlier
// entries more often), so the text has the skewed frequencies of real language.
#include "engine/data_corpus.h"

#include <array>
#include <string_view>
#include <vector>

#include "engine/rng.h"

namespace fp8scope {
namespace {

using Words = std::vector<std::string_view>;

const Words kNames = {"anna", "ben", "clara", "david", "elena", "felix", "grace", "hugo", "iris", "jonas",
                      "karl", "lena", "marco", "nina", "oscar", "paula", "quinn", "rosa", "sam", "tara"};
// Singular and plural nouns, index-aligned.
const Words kNouns = {"cat", "dog", "bird", "child", "teacher", "farmer", "horse", "fox", "king", "queen",
                      "baker", "sailor", "mouse", "wolf", "student", "doctor"};
const Words kNounsPlural = {"cats", "dogs", "birds", "children", "teachers", "farmers", "horses", "foxes",
                            "kings", "queens", "bakers", "sailors", "mice", "wolves", "students", "doctors"};
const Words kThings = {"apple", "book", "stone", "letter", "cake", "lamp", "coin", "box", "shoe", "cup",
                       "key", "map", "ring", "bell", "hat", "rope"};
const Words kThingsPlural = {"apples", "books", "stones", "letters", "cakes", "lamps", "coins", "boxes",
                             "shoes", "cups", "keys", "maps", "rings", "bells", "hats", "ropes"};
// Verbs: third person singular and plural forms, index-aligned.
const Words kVerbs = {"sees", "likes", "finds", "follows", "watches", "helps", "carries", "paints"};
const Words kVerbsPlural = {"see", "like", "find", "follow", "watch", "help", "carry", "paint"};
const Words kAdjectives = {"old", "small", "happy", "quiet", "brave", "red", "clever", "tired", "young",
                           "green", "lazy", "kind"};
const Words kPlaces = {"market", "garden", "river", "castle", "forest", "harbor", "school", "village",
                       "kitchen", "library"};
const Words kNumbers = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                        "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                        "seventeen", "eighteen"};
const Words kTimes = {"in the morning", "at noon", "in the evening", "at night", "every day", "on sunday"};

class Generator {
public:
    explicit Generator(std::uint64_t seed) : rng_(seed) {}

    // Index into a list of n entries with weight 1/(i+1) (Zipf, exponent 1).
    std::size_t zipf(std::size_t n) {
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) total += 1.0 / double(i + 1);
        double u = rng_.uniform() * total;
        for (std::size_t i = 0; i < n; ++i) {
            u -= 1.0 / double(i + 1);
            if (u < 0.0) return i;
        }
        return n - 1;
    }
    std::string_view pick(const Words& w) { return w[zipf(w.size())]; }
    bool chance(double p) { return rng_.uniform() < p; }
    std::size_t uniform(std::size_t n) { return static_cast<std::size_t>(rng_.below(n)); }

    // "the old cat" / "the dogs"; returns whether the phrase is plural.
    bool noun_phrase(std::string& out) {
        bool plural = chance(0.35);
        std::size_t i = zipf(kNouns.size());
        out += "the ";
        if (chance(0.5)) (out += pick(kAdjectives)) += ' ';
        out += plural ? kNounsPlural[i] : kNouns[i];
        return plural;
    }

    void sentence(std::string& out) {
        switch (uniform(7)) {
        case 0:
        case 1: {  // agreement: the brave foxes follow the king.
            std::string subject;
            bool plural = noun_phrase(subject);
            out += subject;
            std::size_t v = zipf(kVerbs.size());
            (out += ' ') += plural ? kVerbsPlural[v] : kVerbs[v];
            out += ' ';
            noun_phrase(out);
            if (chance(0.3)) (out += ' ') += pick(kTimes);
            out += ".";
            break;
        }
        case 2: {  // number agreement: anna has three apples.
            std::size_t n = 1 + uniform(9), t = zipf(kThings.size());
            ((out += pick(kNames)) += " has ") += kNumbers[n];
            (out += ' ') += n == 1 ? kThings[t] : kThingsPlural[t];
            out += ".";
            break;
        }
        case 3: {  // arithmetic: four plus five is nine.
            std::size_t a = uniform(10), b = uniform(9);
            (((out += kNumbers[a]) += " plus ") += kNumbers[b]) += " is ";
            (out += kNumbers[a + b]) += ".";
            break;
        }
        case 4: {  // copying across a sentence: where is hugo? hugo is in the castle.
            std::string_view name = kNames[uniform(kNames.size())];
            std::string_view place = pick(kPlaces);
            ((out += "where is ") += name) += "? ";
            (((out += name) += " is in the ") += place) += ".";
            break;
        }
        case 5: {  // the teacher went to the market and bought two cakes.
            std::size_t n = 1 + uniform(4), t = zipf(kThings.size());
            std::string subject;
            bool plural = noun_phrase(subject);
            ((out += subject) += " went to the ") += pick(kPlaces);
            ((out += " and bought ") += kNumbers[n]) += ' ';
            out += n == 1 ? kThings[t] : kThingsPlural[t];
            out += plural ? ". they were happy." : ".";
            break;
        }
        default: {  // quoted speech wrapping another sentence
            ((out += pick(kNames)) += " said: \"");
            std::string inner;
            sentence(inner);
            (out += inner) += "\"";
            break;
        }
        }
    }

private:
    Rng rng_;
};

}  // namespace

std::string builtin_corpus(std::int64_t bytes, std::uint64_t seed) {
    Generator gen(seed);
    std::string text, sentence;
    text.reserve(static_cast<std::size_t>(bytes) + 256);
    int in_paragraph = 0;
    while (static_cast<std::int64_t>(text.size()) < bytes) {
        sentence.clear();
        gen.sentence(sentence);
        // Sentences are generated in lower case; capitals mark where one begins.
        sentence[0] = static_cast<char>(sentence[0] - 'a' + 'A');
        text += sentence;
        if (++in_paragraph >= 3 + static_cast<int>(gen.uniform(4))) {
            text += '\n';
            in_paragraph = 0;
        } else {
            text += ' ';
        }
    }
    text.resize(static_cast<std::size_t>(bytes));
    return text;
}

}  // namespace fp8scope
