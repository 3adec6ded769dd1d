"""Image preprocessing of the TF-Slim networks: inception, vgg, cifarnet and lenet styles.

``preprocessing_factory.get_preprocessing(name)`` picks the one a network was
trained with.
"""
