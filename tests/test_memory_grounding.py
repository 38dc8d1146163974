"""The grounding check: what a summary names must occur in the turns it covers."""

from __future__ import annotations

from tools.grounding import check

TURNS = (
    "2026-05-07 User: I paid 1000 euros for the flat at https://flats.example/berlin-12. "
    "My landlord is called Jonas Weber. Tomorrow I move in; he said 'keys at noon'."
)


def test_a_faithful_paraphrase_passes_in_other_formats() -> None:
    summary = (
        "On 7 May 2026 the user said they paid 1,000 euros for a flat "
        "(https://flats.example/berlin-12) rented from Jonas Weber, moving in on May 8; "
        "the keys come 'keys at noon'."
    )
    assert check(summary, TURNS).ok, check(summary, TURNS).reason()


def test_each_kind_of_invented_specific_is_named() -> None:
    cases = {
        "numbers": "The user paid 1,200 euros for the flat.",
        "names": "The landlord, Jonas Schmidt, lives nearby.",
        "dates": "The user moves in on 2026-06-01.",
        "links": "The listing is at https://flats.example/munich-3.",
        "quotes": 'The landlord said "no pets allowed".',
    }
    for kind, summary in cases.items():
        result = check(summary, TURNS)
        assert not result.ok and kind in result.missing, (kind, result.missing)


def test_claiming_code_ran_needs_a_successful_tool_result() -> None:
    summary = "Sidekick executed the code, revealing the answer."
    assert check(summary, TURNS, tool_succeeded=True).ok
    assert "tool results" in check(summary, TURNS, tool_succeeded=False).missing


def test_german_nouns_are_not_names_when_names_are_off() -> None:
    turns = "Ich habe 1000 Euro für die Wohnung bezahlt."
    summary = "Der Nutzer hat 1000 Euro für eine Wohnung in der Stadt bezahlt."
    assert not check(summary, turns).ok  # "Nutzer", "Stadt" would read as names
    assert check(summary, turns, names=False).ok
    assert not check("Der Nutzer hat 2000 Euro bezahlt.", turns, names=False).ok


def test_a_unit_after_a_degree_sign_is_not_a_name_but_its_number_is_checked() -> None:
    turns = "2026-05-07 User: I am flying to Porto tomorrow, it should be 20 degrees there."
    assert check("The user flies to Porto, where it will be 20 °C.", turns).ok
    assert check("The user flies to Porto, where it will be 20°C.", turns).ok
    invented = check("The user flies to Porto, where it is sunny, around 24 °C.", turns)
    assert invented.missing == {"numbers": ["24"]}, invented.missing


def test_units_after_a_number_are_not_names_and_invented_facts_are_named() -> None:
    turns = "2026-05-07 User: what is the weather in Lisbon? The file was 3 MB, the walk 5 km."
    # Units written with capitals after their number are units (the numbers were said).
    said = "In Lisbon the user asked about 20 C, a 3 MB file and a 5 KM walk."
    assert check(said, turns.replace("Lisbon?", "Lisbon? 20 maybe")).ok
    # An invented place and an invented number are rejected, and named: not the unit.
    invented = check("It is sunny, around 20 C in Porto. Barcelona won the final.", turns)
    assert invented.missing == {"numbers": ["20"], "names": ["Porto", "Barcelona"]}
    assert "Porto, Barcelona" in invented.reason() and "C" not in invented.missing["names"]


def test_urls_as_a_word_is_no_name() -> None:
    # make test-real's 0.5B summariser: "… used the `web_fetch` tool again to retrieve the
    # URLs of the tomatoes and basil plants" was refused for naming "URLs".
    source = "User: I planted tomatoes and basil.\nSidekick: Nice."
    assert check("The user fetched the URLs about tomatoes and basil.", source).ok
    assert not check("The user fetched the URLs about tomatoes in Lyon.", source).ok


def test_a_numbered_list_numbers_its_own_points() -> None:
    # make test-real's 0.5B summariser wrote "1. The user … 5. The user spent the afternoon
    # in the garden": refused for "numbers not in the turns: 1, 3, 4, 5".
    source = "User: My locker code is 4711.\nUser: I planted tomatoes and basil."
    listed = "The user:\n1. has locker code 4711.\n2) planted tomatoes.\n 3. planted basil."
    assert check(listed, source).ok, check(listed, source).reason()
    # A number inside an item is still checked, and so is one that opens a sentence.
    invented = check("1. The locker code is 4712.\n2. planted basil.", source)
    assert invented.missing == {"numbers": ["4712"]}, invented.missing
    assert check("Code 4711.\n7 plants were planted.", source).missing == {"numbers": ["7"]}


def test_a_hyphenated_name_the_user_said_is_grounded() -> None:
    # tools/grounding.py once defined its word pattern twice; the second (letters only, for
    # language detection) replaced the first, so "Jean-Luc" said was read as "jean", "luc"
    # and the summary naming him was flagged as inventing a name.
    turns = "User: Jean-Luc and Mary-Anne O'Brien come for dinner on Friday."
    summary = "Jean-Luc and Mary-Anne O'Brien are coming for dinner on Friday."
    assert check(summary, turns).ok, check(summary, turns).reason()
    assert "names" in check("Anne-Sophie is coming for dinner.", turns).missing
