package names

// lookalike maps letters that render like a Latin letter in common fonts
// to that letter: Cyrillic, Greek and Armenian capitals and small letters,
// and a few Latin variants. Fullwidth and mathematical forms need no entry
// (NFKC folds them). Small and kept by hand: the common spoofs, not every
// confusable Unicode lists.
var lookalike = map[rune]rune{
	// Cyrillic capitals
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P',
	'С': 'C', 'Т': 'T', 'Х': 'X', 'У': 'Y', 'Ү': 'Y', 'Ѕ': 'S', 'І': 'I', 'Ј': 'J',
	'Ԛ': 'Q', 'Ԝ': 'W', 'Һ': 'H', 'Ӏ': 'I',
	// Cyrillic small letters
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'ѕ': 's',
	'і': 'i', 'ј': 'j', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'һ': 'h', 'ӏ': 'l', 'ү': 'y',
	'ɡ': 'g', 'ѵ': 'v',
	// Greek capitals
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M',
	'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Greek small letters
	'ο': 'o', 'ν': 'v', 'ρ': 'p', 'ι': 'i', 'α': 'a', 'κ': 'k', 'υ': 'u',
	// Armenian
	'օ': 'o', 'ս': 'u', 'ո': 'n', 'հ': 'h', 'ց': 'g', 'զ': 'q',
	// Latin variants
	'ı': 'i', 'ȷ': 'j', 'ǀ': 'l', 'ℓ': 'l', 'ꓲ': 'I', 'ꓳ': 'O',
}
